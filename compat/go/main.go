// go-redis v9 against slotgate, as applications use it: redis.Client and redis.ClusterClient,
// each in RESP2 and RESP3. Run by compat/run.py (COMPAT_PROXY=host:port); prints one
// `PASS|FAIL|SKIP go-redis/<mode>/<resp>/<case>` line per case (see compat/run.py).
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
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

func caseHandshake(m *mode) error {
	hello, err := m.c.Do(bg, "HELLO", m.proto).Result()
	if err != nil {
		return err
	}
	var proto any
	switch h := hello.(type) {
	case map[any]any:
		proto = h["proto"]
	case []any:
		for i := 0; i+1 < len(h); i += 2 {
			if h[i] == "proto" {
				proto = h[i+1]
			}
		}
	}
	return first(
		eq("PING", m.c.Ping(bg).Val(), "PONG"),
		eq("ECHO", m.c.Echo(bg, "hi").Val(), "hi"),
		eq("HELLO proto", proto, int64(m.proto)),
	)
}

func caseString(m *mode) error {
	k := m.key("str")
	m.c.Set(bg, k, "v1", 0)
	e := first(
		eq("GET", m.c.Get(bg, k).Val(), "v1"),
		eq("APPEND", m.c.Append(bg, k, "23").Val(), int64(4)),
		eq("GETRANGE", m.c.GetRange(bg, k, 1, 2).Val(), "12"),
		eq("INCRBY", m.c.IncrBy(bg, m.key("ctr"), 5).Val(), int64(5)),
		eq("INCRBYFLOAT", m.c.IncrByFloat(bg, m.key("ctr"), 0.5).Val(), 5.5),
		eq("SET EX", m.c.Set(bg, k, "x", 100*time.Second).Val(), "OK"),
		eq("SETNX on existing", m.c.SetNX(bg, k, "y", 0).Val(), false),
	)
	if ttl := m.c.TTL(bg, k).Val(); e == nil && (ttl <= 0 || ttl > 100*time.Second) {
		e = fmt.Errorf("TTL %v", ttl)
	}
	return e
}

func caseHash(m *mode) error {
	k := m.key("hash")
	return first(
		eq("HSET", m.c.HSet(bg, k, "a", "1", "b", "2").Val(), int64(2)),
		eq("HGETALL", m.c.HGetAll(bg, k).Val(), map[string]string{"a": "1", "b": "2"}),
		eq("HINCRBY", m.c.HIncrBy(bg, k, "a", 10).Val(), int64(11)),
		eq("HMGET", m.c.HMGet(bg, k, "a", "b", "zz").Val(), []any{"11", "2", nil}),
	)
}

func caseList(m *mode) error {
	k := m.key("list")
	return first(
		eq("RPUSH", m.c.RPush(bg, k, "a", "b", "c").Val(), int64(3)),
		eq("LRANGE", m.c.LRange(bg, k, 0, -1).Val(), []string{"a", "b", "c"}),
		eq("LPOP", m.c.LPop(bg, k).Val(), "a"),
	)
}

func caseSet(m *mode) error {
	k := m.key("set")
	got := m.c.SMembers(bg, k).Val()
	sort.Strings(got)
	return first(
		eq("SADD", m.c.SAdd(bg, k, "a", "b", "c").Val(), int64(3)),
		eq("SISMEMBER", m.c.SIsMember(bg, k, "b").Val(), true),
		func() error { got = m.c.SMembers(bg, k).Val(); sort.Strings(got); return nil }(),
		eq("SMEMBERS", got, []string{"a", "b", "c"}),
	)
}

func caseZset(m *mode) error {
	k := m.key("zset")
	return first(
		eq("ZADD", m.c.ZAdd(bg, k, redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2.5, Member: "b"}).Val(), int64(2)),
		eq("ZRANGE WITHSCORES", m.c.ZRangeWithScores(bg, k, 0, -1).Val(),
			[]redis.Z{{Score: 1, Member: "a"}, {Score: 2.5, Member: "b"}}),
		eq("ZSCORE", m.c.ZScore(bg, k, "b").Val(), 2.5),
	)
}

func caseStream(m *mode) error {
	k := m.key("stream")
	id1 := m.c.XAdd(bg, &redis.XAddArgs{Stream: k, Values: []string{"f", "1"}}).Val()
	m.c.XAdd(bg, &redis.XAddArgs{Stream: k, Values: []string{"f", "2"}})
	rng := m.c.XRange(bg, k, "-", "+").Val()
	rd, err := m.c.XRead(bg, &redis.XReadArgs{Streams: []string{k, id1}, Count: 10, Block: -1}).Result()
	if err != nil {
		return fmt.Errorf("XREAD: %w", err)
	}
	return first(
		eq("XRANGE len", len(rng), 2),
		eq("XRANGE values", rng[1].Values, map[string]any{"f": "2"}),
		eq("XREAD", rd[0].Messages[0].Values, map[string]any{"f": "2"}),
	)
}

func caseHLLGeoBits(m *mode) error {
	h, g, b := m.key("hll"), m.key("geo"), m.key("bits")
	m.c.PFAdd(bg, h, "a", "b", "c", "a")
	m.c.GeoAdd(bg, g, &redis.GeoLocation{Name: "Palermo", Longitude: 13.361389, Latitude: 38.115556},
		&redis.GeoLocation{Name: "Catania", Longitude: 15.087269, Latitude: 37.502669})
	m.c.SetBit(bg, b, 7, 1)
	m.c.SetBit(bg, b, 100, 1)
	d := m.c.GeoDist(bg, g, "Palermo", "Catania", "km").Val()
	return first(
		eq("PFCOUNT", m.c.PFCount(bg, h).Val(), int64(3)),
		eq("GEODIST", d > 166.26 && d < 166.29, true),
		eq("BITCOUNT", m.c.BitCount(bg, b, nil).Val(), int64(2)),
	)
}

func caseCrossSlot(m *mode) error {
	var keys []string
	var pairs []any
	var vals []any
	for i := 0; i < 12; i++ {
		k := m.key(fmt.Sprintf("mk%d", i))
		keys = append(keys, k)
		pairs = append(pairs, k, fmt.Sprintf("v%d", i))
		vals = append(vals, fmt.Sprintf("v%d", i))
	}
	// The cluster client sends a multi-key command to the node of its first key; through the
	// proxy (one node owning every slot) keys of any slot work, where a real cluster says CROSSSLOT.
	return first(
		m.c.MSet(bg, pairs...).Err(),
		eq("MGET", m.c.MGet(bg, keys...).Val(), vals),
		eq("EXISTS", m.c.Exists(bg, keys...).Val(), int64(12)),
		eq("DEL", m.c.Del(bg, keys...).Val(), int64(12)),
	)
}

func casePipeline(m *mode) error {
	const n = 160
	cmds, err := m.c.Pipelined(bg, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.Set(bg, m.key(fmt.Sprint("p", i)), i, 0)
		}
		for i := 0; i < n; i++ {
			p.Incr(bg, m.key(fmt.Sprint("p", i)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if v := cmds[n+i].(*redis.IntCmd).Val(); v != int64(i+1) {
			return fmt.Errorf("INCR %d answered %d", i, v)
		}
	}
	return nil
}

func caseMulti(m *mode) error {
	k := m.tagged("tx")
	var get *redis.StringCmd
	_, err := m.c.TxPipelined(bg, func(p redis.Pipeliner) error {
		p.Set(bg, k+"a", 1, 0)
		p.Incr(bg, k+"a")
		get = p.Get(bg, k+"a")
		return nil
	})
	return first(err, eq("GET in EXEC", get.Val(), "2"))
}

func caseWatch(m *mode) error {
	k := m.key("watched")
	m.c.Set(bg, k, "0", 0)
	other := m.newClient(false)
	defer other.Close()
	err := m.c.Watch(bg, func(tx *redis.Tx) error {
		other.Set(bg, k, "changed", 0)
		_, err := tx.TxPipelined(bg, func(p redis.Pipeliner) error {
			p.Set(bg, k, "mine", 0)
			return nil
		})
		return err
	}, k)
	return first(eq("EXEC after a change", err, redis.TxFailedErr), eq("value", m.c.Get(bg, k).Val(), "changed"))
}

func caseScript(m *mode) error {
	k := m.key("script")
	src := "return redis.call('INCRBY', KEYS[1], ARGV[1])"
	s := redis.NewScript(src)
	sha := m.c.ScriptLoad(bg, "return ARGV[1]").Val()
	return first(
		eq("EVAL", m.c.Eval(bg, src, []string{k}, 3).Val(), int64(3)),
		eq("Script.Run (EVALSHA)", s.Run(bg, m.c, []string{k}, 4).Val(), int64(7)),
		eq("EVALSHA", m.c.EvalSha(bg, sha, nil, "x").Val(), "x"),
	)
}

func pubsubRoundtrip(m *mode, sharded bool) error {
	ch := m.key("chan")
	var ps *redis.PubSub
	if sharded {
		ps = m.c.SSubscribe(bg, ch)
	} else {
		ps = m.c.Subscribe(bg, ch)
	}
	defer ps.Close()
	if _, err := ps.ReceiveTimeout(bg, timeout); err != nil {
		return fmt.Errorf("confirmation: %w", err)
	}
	var n int64
	if sharded {
		n = m.c.SPublish(bg, ch, "hello").Val()
	} else {
		n = m.c.Publish(bg, ch, "hello").Val()
	}
	msg, err := ps.ReceiveTimeout(bg, timeout)
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	got, ok := msg.(*redis.Message)
	if !ok {
		return fmt.Errorf("got %T %v, want a message", msg, msg)
	}
	return first(eq("receivers", n, int64(1)), eq("message", got.Channel+"|"+got.Payload, ch+"|hello"))
}

func casePubsub(m *mode) error  { return pubsubRoundtrip(m, false) }
func caseSPubsub(m *mode) error { return pubsubRoundtrip(m, true) }

func caseBlocking(m *mode) error {
	k := m.key("blk")
	if err := m.c.BLPop(bg, 200*time.Millisecond, k).Err(); err != redis.Nil {
		return fmt.Errorf("BLPOP on empty: %v, want nil", err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		m.c.RPush(bg, k, "late")
	}()
	got, err := m.c.BLPop(bg, timeout, k).Result()
	return first(err, eq("BLPOP woken by a push", got, []string{k, "late"}))
}

func caseScan(m *mode) error {
	want := map[string]bool{}
	for i := 0; i < 60; i++ {
		k := m.key(fmt.Sprint("scan:", i))
		want[k] = true
		m.c.Set(bg, k, "1", 0)
	}
	got := map[string]bool{}
	scan := func(c redis.Cmdable) error {
		it := c.Scan(bg, 0, m.key("scan:*"), 25).Iterator()
		for it.Next(bg) {
			got[it.Val()] = true
		}
		return it.Err()
	}
	var err error
	if cc, ok := m.c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(bg, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(c)
		})
	} else {
		err = scan(m.c)
	}
	return first(err, eq("SCAN MATCH", got, want))
}

func caseConcurrent(m *mode) error {
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 40; j++ {
				k, v := m.key(fmt.Sprintf("conc:%d:%d", i, j)), fmt.Sprintf("%d-%d", i, j)
				m.c.Set(bg, k, v, 0)
				if e := eq("GET", m.c.Get(bg, k).Val(), v); e != nil {
					errs <- e
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func caseBig(m *mode) error {
	raw := make([]byte, 3*512*1024)
	rand.Read(raw)
	v := base64.StdEncoding.EncodeToString(raw)
	k := m.key("big")
	return first(
		m.c.Set(bg, k, v, 0).Err(),
		eq("STRLEN", m.c.StrLen(bg, k).Val(), int64(len(v))),
		eq("GET 2MB", m.c.Get(bg, k).Val() == v, true),
	)
}

func caseHealth(m *mode) error {
	m.c.Set(bg, m.key("health"), "1", 0)
	return first(
		eq("PING", m.c.Ping(bg).Val(), "PONG"),
		eq("INFO has redis_version", strings.Contains(m.c.Info(bg).Val(), "redis_version:"), true),
		eq("INFO keyspace", strings.Contains(m.c.Info(bg, "keyspace").Val(), "db0:keys="), true),
	)
}

func caseInfoRole(m *mode) error {
	return eq("INFO replication", strings.Contains(m.c.Info(bg, "replication").Val(), "role:master"), true)
}

func caseReplicaRead(m *mode) error {
	k := m.key("ro")
	m.c.Set(bg, k, "seen", 0)
	if m.cluster {
		r := m.newClient(true) // ReadOnly: READONLY on connect, reads go to replicas
		defer r.Close()
		return eq("read", r.Get(bg, k).Val(), "seen")
	}
	conn := m.c.(*redis.Client).Conn()
	defer conn.Close()
	return first(eq("READONLY", conn.ReadOnly(bg).Val(), "OK"), eq("read", conn.Get(bg, k).Val(), "seen"))
}

func caseWait(m *mode) error {
	if m.cluster {
		return errSkip("ClusterClient sends WAIT to a random node; checked with redis.Client")
	}
	m.c.Set(bg, m.key("wait"), "1", 0)
	n, err := m.c.Do(bg, "WAIT", 1, 0).Int64()
	if err != nil || n < 1 {
		return fmt.Errorf("WAIT 1 0 answered %d, %v", n, err)
	}
	return nil
}

func caseKeyspace(m *mode) error {
	if m.cluster {
		return errSkip("checked with redis.Client")
	}
	ps := m.c.PSubscribe(bg, "__keyspace@0__:*"+m.key("ks"))
	defer ps.Close()
	if _, err := ps.ReceiveTimeout(bg, timeout); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, t := range []string{"b", "c", "a"} { // slots 3300, 7365, 15495: one per master
		k := "{" + t + "}" + m.key("ks")
		want[k] = true
		m.c.Set(bg, k, "1", 0)
	}
	got := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for len(got) < len(want) && time.Now().Before(deadline) {
		msg, err := ps.ReceiveTimeout(bg, time.Second)
		if mm, ok := msg.(*redis.Message); err == nil && ok {
			got[strings.SplitN(mm.Channel, ":", 2)[1]] = true
		}
	}
	return eq("keys with events", got, want)
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
