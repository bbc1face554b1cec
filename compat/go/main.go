// go-redis v9 against slotgate, as applications use it: redis.Client and redis.ClusterClient,
// each in RESP2 and RESP3. Run by compat/run.py (COMPAT_PROXY=host:port); prints one
// `PASS|FAIL|SKIP go-redis/<mode>/<resp>/<case>` line per case (see compat/run.py).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	proxyAddr = envOr("COMPAT_PROXY", "127.0.0.1:7000")
	prefix    = envOr("COMPAT_PREFIX", "cgo")
	bg        = context.Background()
)

const timeout = 10 * time.Second

// errSkip marks a case the library cannot express in this mode.
type errSkip string

func (e errSkip) Error() string { return string(e) }

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// mode is one client kind and protocol; it makes clients and names keys.
type mode struct {
	name    string
	proto   int
	cluster bool
	c       redis.UniversalClient
}

func (m *mode) newClient(readOnly bool) redis.UniversalClient {
	if m.cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: []string{proxyAddr}, Protocol: m.proto, ReadOnly: readOnly,
			ReadTimeout: timeout + 5*time.Second, PoolSize: 30,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr: proxyAddr, Protocol: m.proto, ReadTimeout: timeout + 5*time.Second, PoolSize: 30,
	})
}

func (m *mode) key(n string) string {
	return fmt.Sprintf("%s:%s:r%d:%s", prefix, m.name, m.proto, n)
}

func (m *mode) tagged(n string) string { return "{" + m.key(n) + "}" }

func eq(label string, got, want any) error {
	if !reflect.DeepEqual(got, want) {
		g := fmt.Sprintf("%v", got)
		if len(g) > 200 {
			g = g[:200]
		}
		return fmt.Errorf("%s: got %s (%T), want %v", label, g, got, want)
	}
	return nil
}

// first returns the first non-nil error: cases chain checks and stop at the first failure.
func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

var cases = []struct {
	name string
	fn   func(*mode) error
}{
	{"handshake", caseHandshake}, {"string", caseString}, {"hash", caseHash}, {"list", caseList},
	{"set", caseSet}, {"zset", caseZset}, {"stream", caseStream}, {"hll-geo-bitmap", caseHLLGeoBits},
	{"crossslot-multikey", caseCrossSlot}, {"pipeline-160", casePipeline}, {"multi-exec", caseMulti},
	{"watch", caseWatch}, {"script", caseScript}, {"pubsub", casePubsub},
	{"sharded-pubsub", caseSPubsub}, {"blocking-pop", caseBlocking}, {"scan", caseScan},
	{"concurrent-20", caseConcurrent}, {"big-value-2mb", caseBig}, {"health", caseHealth},
	{"replica-read", caseReplicaRead}, {"info-role-master", caseInfoRole},
	{"wait-replica", caseWait}, {"keyspace-all-masters", caseKeyspace},
}

func runCase(m *mode, name string, fn func(*mode) error) {
	label := fmt.Sprintf("go-redis/%s/resp%d/%s", m.name, m.proto, name)
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return fn(m)
	}()
	var skip errSkip
	switch {
	case err == nil:
		fmt.Println("PASS", label)
	case errors.As(err, &skip):
		fmt.Printf("SKIP %s: %s\n", label, skip)
	default:
		fmt.Printf("FAIL %s: %s\n", label, strings.ReplaceAll(err.Error(), "\n", " "))
	}
}

func main() {
	for _, cl := range []bool{false, true} {
		for _, proto := range []int{2, 3} {
			m := &mode{name: map[bool]string{false: "client", true: "cluster"}[cl], proto: proto, cluster: cl}
			m.c = m.newClient(false)
			for _, c := range cases {
				runCase(m, c.name, c.fn)
			}
			m.c.Close()
		}
	}
}
