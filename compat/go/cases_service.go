// go-redis cases for the service side: pub/sub, blocking pops, SCAN, concurrency, big values,
// health checks, replica reads, and the pending WAIT / keyspace / INFO cases (main.go runs them).
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	if os.Getenv("COMPAT_REPLICAS") == "0" {
		return errSkip("the servers have no replica")
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
