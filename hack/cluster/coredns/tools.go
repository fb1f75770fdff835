//go:build tools

// Package tools records the command this module builds, so that go.sum covers it.
package tools

import _ "github.com/coredns/coredns"
