// Command robfig_oracle prints the times robfig/cron gives a schedule: the expected values of
// tests/test_cron.py come from it. Kubeflow reads a recurring run's cron with v1.2.0's cron.Parse;
// the Kubernetes API server reads a CronJob's schedule with v3's ParseStandard.
//
// Each line of standard input is a JSON query, {"dialect": "kubeflow" or "cronjob", "spec": "...",
// "from": UNIX_SECONDS, "count": N}; each line of output is {"error": "..."} or {"times": [...]},
// the times Next gives from "from", again and again (fewer when Next finds none in five years).
//
//	cd scripts/robfig_oracle && go mod tidy && echo '{"dialect":"kubeflow","spec":"0 */5 * * *","from":1735732837,"count":3}' | go run .
package main

import (
	"bufio"
	"encoding/json"
	"os"
	"time"

	cronv1 "github.com/robfig/cron"
	cronv3 "github.com/robfig/cron/v3"
)

type query struct {
	Dialect string `json:"dialect"`
	Spec    string `json:"spec"`
	From    int64  `json:"from"`
	Count   int    `json:"count"`
}

type answer struct {
	Error string  `json:"error,omitempty"`
	Times []int64 `json:"times"`
}

type schedule interface{ Next(time.Time) time.Time }

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var q query
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			panic(err)
		}
		var s schedule
		var err error
		if q.Dialect == "kubeflow" {
			s, err = cronv1.Parse(q.Spec)
		} else {
			s, err = cronv3.ParseStandard(q.Spec)
		}
		a := answer{Times: []int64{}}
		if err != nil {
			a.Error = err.Error()
		} else {
			t := time.Unix(q.From, 0).UTC()
			for i := 0; i < q.Count; i++ {
				if t = s.Next(t); t.IsZero() {
					break
				}
				a.Times = append(a.Times, t.Unix())
			}
		}
		if err := out.Encode(a); err != nil {
			panic(err)
		}
	}
}
