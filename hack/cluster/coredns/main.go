// Command coredns is CoreDNS with only the plugins the real node's Corefile uses (hack/cluster/realnode.py):
// the full build compiles every cloud provider's SDK for nothing.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

// The order of plugin.cfg, which decides the order a query passes them in.
var directives = []string{"bind", "errors", "cache", "kubernetes", "forward"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
