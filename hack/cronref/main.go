// Command cronref is a reference oracle for Kubernetes CronJob fire times.
//
// It computes the fire times of a CronJob schedule EXACTLY as the Kubernetes
// CronJob controller does, using the very same library and version
// (github.com/robfig/cron/v3 v3.0.1, the version pinned by k8s.io/kubernetes
// v1.33.x), so that the Python implementation in appschedule-operator can be
// tested against it.
//
// # Controller code path mirrored (k8s.io/kubernetes v1.33.13)
//
// pkg/controller/cronjob/cronjob_controllerv2.go, (*ControllerV2).syncCronJob:
//
//  1. if cronJob.Spec.TimeZone != nil: time.LoadLocation(timeZone); on error
//     the controller emits the Warning event "UnknownTimeZone"
//     ("invalid timeZone: %q: %s") and does not schedule anything.
//     -> here: {"ok":false,"reason":"UnknownTimeZone","error":<LoadLocation error>}
//  2. sched, err := cron.ParseStandard(formatSchedule(cronJob, recorder)); on
//     error the event "UnparseableSchedule" is emitted and nothing is scheduled.
//     -> here: {"ok":false,"reason":"UnparseableSchedule","error":<robfig error>}
//  3. fire times are produced by sched.Next(...) (mostRecentScheduleTime in
//     utils.go calls schedule.Next(earliestTime), schedule.Next(t1), ...).
//     -> here: next[0] = sched.Next(after), next[i] = sched.Next(next[i-1]),
//     stopping early if Next returns the zero time (robfig gives up after
//     searching 5 years, e.g. "0 0 31 2 *"); the controller turns that case
//     into the "InvalidSchedule" event, here it is {"ok":true,"next":[]}.
//
// formatSchedule (same file) is reproduced verbatim in formatSchedule below:
//   - if the schedule contains the substring "TZ" (case-sensitive, anywhere,
//     so "TZ=..." and "CRON_TZ=..." prefixes) the schedule is used as-is and
//     spec.timeZone is ignored;
//   - else if spec.timeZone != nil and time.LoadLocation succeeds the spec
//     becomes "TZ=<timeZone> <schedule>";
//   - else the schedule is used as-is (robfig then uses time.Local, i.e. the
//     location of the time passed to Next).
//
// In this program an absent, null or "" timeZone means spec.timeZone == nil
// (the API server rejects a non-nil "" anyway: "timeZone must be nil or
// non-empty string"). A nil timeZone means the controller's local zone; all
// times are handed to Next in UTC, so that is UTC here, regardless of the TZ
// environment of this process. kube-controller-manager links time/tzdata, and
// so does this program.
//
// The controller's extra bookkeeping (startingDeadlineSeconds, the 100 missed
// schedules limit, the "< 1 second between schedules" check) is not modelled:
// only the schedule semantics (parse + Next) are.
//
// # Protocol (JSON lines, stdin -> stdout, one response line per request line)
//
// Request:  {"schedule":"0 17 * * 5","timeZone":"Europe/Berlin","after":"2026-03-07T12:00:00Z","count":5}
//
//	"after" is RFC 3339 (fractional seconds and offsets accepted, converted to
//	UTC); "count" defaults to 1 when absent, must be 0..100000.
//
// Response: {"ok":true,"next":["2026-03-13T16:00:00Z",...]}
//
//	or {"ok":false,"reason":"UnparseableSchedule","error":"<robfig error text>"}
//	reason is one of UnparseableSchedule, UnknownTimeZone, ParsePanic
//	(robfig v3.0.1 panics on "TZ=<zone>" / "CRON_TZ=<zone>" with no space
//	after it; the API server's validation calls ParseStandard too, so such a
//	CronJob is refused there with a recovered panic, never stored),
//	BadRequest (malformed request line / after / count).
//
// The output is flushed whenever no further input is already buffered, so a
// process can drive it interactively through pipes, while bulk input is fast.
// A blank input line is ignored (no response).
//
// # Regenerating tests/unit/data/robfig_cases.json
//
//	cd hack/cronref && go run . -cases < cases.jsonl > ../../tests/unit/data/robfig_cases.json
//
// In -cases mode each cases.jsonl line is a request (plus an optional "note"),
// and the output is one pretty-printed JSON list of
// {"note"?,"schedule","timeZone","after","count","ok","next"|"reason"+"error"}.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // like cmd/kube-controller-manager: "for CronJob Time Zone support"

	"github.com/robfig/cron/v3"
)

const maxCount = 100000

type request struct {
	Note     string  `json:"note,omitempty"`
	Schedule *string `json:"schedule"`
	TimeZone *string `json:"timeZone"`
	After    string  `json:"after"`
	Count    *int    `json:"count"`
}

type response struct {
	OK     bool     `json:"ok"`
	Next   []string `json:"next,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// okResponse always serialises "next", even when empty.
type okResponse struct {
	OK   bool     `json:"ok"`
	Next []string `json:"next"`
}

type caseOut struct {
	Note     string   `json:"note,omitempty"`
	Schedule string   `json:"schedule"`
	TimeZone string   `json:"timeZone"`
	After    string   `json:"after"`
	Count    int      `json:"count"`
	OK       bool     `json:"ok"`
	Next     []string `json:"next,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// formatSchedule is k8s.io/kubernetes pkg/controller/cronjob formatSchedule
// (v1.33.13) without the event recorder.
func formatSchedule(schedule string, timeZone *string) string {
	if strings.Contains(schedule, "TZ") {
		return schedule
	}
	if timeZone != nil {
		if _, err := time.LoadLocation(*timeZone); err != nil {
			return schedule
		}
		return fmt.Sprintf("TZ=%s %s", *timeZone, schedule)
	}
	return schedule
}

type parsed struct {
	sched  cron.Schedule
	reason string
	err    string
}

type key struct {
	schedule, tz string
	hasTZ        bool
}

var cache = map[key]parsed{}

func parse(schedule string, timeZone *string) parsed {
	k := key{schedule: schedule}
	if timeZone != nil {
		k.tz, k.hasTZ = *timeZone, true
	}
	if p, ok := cache[k]; ok {
		return p
	}
	p := parseUncached(schedule, timeZone)
	if len(cache) > 100000 {
		cache = map[key]parsed{}
	}
	cache[k] = p
	return p
}

func parseUncached(schedule string, timeZone *string) (p parsed) {
	// syncCronJob: validate spec.timeZone first.
	if timeZone != nil {
		if _, err := time.LoadLocation(*timeZone); err != nil {
			return parsed{reason: "UnknownTimeZone", err: err.Error()}
		}
	}
	defer func() {
		if r := recover(); r != nil {
			p = parsed{reason: "ParsePanic", err: fmt.Sprint(r)}
		}
	}()
	s, err := cron.ParseStandard(formatSchedule(schedule, timeZone))
	if err != nil {
		return parsed{reason: "UnparseableSchedule", err: err.Error()}
	}
	return parsed{sched: s}
}

func evaluate(req *request) response {
	if req.Schedule == nil {
		return response{Reason: "BadRequest", Error: "missing \"schedule\""}
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if count < 0 || count > maxCount {
		return response{Reason: "BadRequest", Error: fmt.Sprintf("count must be in [0, %d]", maxCount)}
	}
	after, err := time.Parse(time.RFC3339Nano, req.After)
	if err != nil {
		return response{Reason: "BadRequest", Error: "bad \"after\": " + err.Error()}
	}
	after = after.UTC()
	tz := req.TimeZone
	if tz != nil && *tz == "" {
		tz = nil
	}
	p := parse(*req.Schedule, tz)
	if p.sched == nil {
		return response{Reason: p.reason, Error: p.err}
	}
	next := make([]string, 0, count)
	t := after
	for i := 0; i < count; i++ {
		n := p.sched.Next(t)
		if n.IsZero() {
			break
		}
		if !n.After(t) { // never observed; guard against an endless loop
			break
		}
		next = append(next, n.UTC().Format(time.RFC3339))
		t = n
	}
	return response{OK: true, Next: next}
}

func encodeResponse(r response) []byte {
	var b []byte
	var err error
	if r.OK {
		b, err = json.Marshal(okResponse{OK: true, Next: r.Next})
	} else {
		b, err = json.Marshal(r)
	}
	if err != nil {
		panic(err)
	}
	return b
}

func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	defer w.Flush()
	for {
		// Flush before we would block waiting for more input.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var req request
			var resp response
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				resp = response{Reason: "BadRequest", Error: "bad request line: " + jerr.Error()}
			} else {
				resp = evaluate(&req)
			}
			w.Write(encodeResponse(resp))
			w.WriteByte('\n')
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func generateCases(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(in)
	cases := []caseOut{}
	for {
		var req request
		if err := dec.Decode(&req); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if req.Schedule == nil {
			return fmt.Errorf("case without schedule: %+v", req)
		}
		resp := evaluate(&req)
		if resp.Reason == "BadRequest" {
			return fmt.Errorf("bad case %+v: %s", req, resp.Error)
		}
		c := caseOut{Note: req.Note, Schedule: *req.Schedule, After: req.After, Count: 1,
			OK: resp.OK, Next: resp.Next, Reason: resp.Reason, Error: resp.Error}
		if req.TimeZone != nil {
			c.TimeZone = *req.TimeZone
		}
		if req.Count != nil {
			c.Count = *req.Count
		}
		cases = append(cases, c)
	}
	b, err := marshalCases(cases)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

// marshalCases writes one case per block with "next" always present for ok cases.
func marshalCases(cases []caseOut) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i, c := range cases {
		var m []byte
		var err error
		if c.OK {
			type okCase struct {
				Note     string   `json:"note,omitempty"`
				Schedule string   `json:"schedule"`
				TimeZone string   `json:"timeZone"`
				After    string   `json:"after"`
				Count    int      `json:"count"`
				OK       bool     `json:"ok"`
				Next     []string `json:"next"`
			}
			next := c.Next
			if next == nil {
				next = []string{}
			}
			m, err = json.MarshalIndent(okCase{c.Note, c.Schedule, c.TimeZone, c.After, c.Count, true, next}, "  ", "  ")
		} else {
			m, err = json.MarshalIndent(c, "  ", "  ")
		}
		if err != nil {
			return nil, err
		}
		buf.WriteString("  ")
		buf.Write(m)
		if i < len(cases)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]\n")
	return buf.Bytes(), nil
}

func main() {
	casesMode := flag.Bool("cases", false, "read case requests (JSON lines) on stdin and write the robfig_cases.json list to stdout")
	flag.Parse()
	var err error
	if *casesMode {
		err = generateCases(os.Stdin, os.Stdout)
	} else {
		err = serve(os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cronref:", err)
		os.Exit(1)
	}
}
