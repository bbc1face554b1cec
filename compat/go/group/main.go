// go-redis ClusterClient against a slotgate proxy group of 3 (docs/group.md), under load,
// while one proxy is killed: the go-redis counterpart of compat/java/GroupFailover.java,
// with the same environment (GROUP_PROXIES, GROUP_VICTIM, GROUP_VICTIM_PID, GROUP_THREADS,
// GROUP_WARMUP_MS, GROUP_AFTER_MS) plus GROUP_RELOAD_MS (ClusterStateReloadInterval; 0 =
// go-redis's default). Run by `scripts/group_failover.py --client go`; prints the same
// summary line. Measures, does not judge: go-redis reloads its slots only on its interval.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func env(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}

func main() {
	ctx := context.Background()
	proxies := strings.Split(os.Getenv("GROUP_PROXIES"), ",")
	threads := env("GROUP_THREADS", 12)
	opts := &redis.ClusterOptions{Addrs: proxies, PoolSize: threads + 4}
	if ms := env("GROUP_RELOAD_MS", 0); ms > 0 {
		opts.ClusterStateReloadInterval = time.Duration(ms) * time.Millisecond
	}
	c := redis.NewClusterClient(opts)
	var errors, before, after atomic.Int64
	var killAt atomic.Int64
	killAt.Store(1 << 62)
	var first atomic.Value
	stalls := make([]time.Duration, threads)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			lastOK := time.Now()
			for n := 0; ; n++ {
				select {
				case <-stop:
					stalls[t] = max(stalls[t], time.Since(lastOK))
					return
				default:
				}
				key := fmt.Sprintf("grp:%d:%d", t, n%2000)
				err := c.Set(ctx, key, n, 0).Err()
				if err == nil {
					err = c.Get(ctx, key).Err()
				}
				now := time.Now()
				if err != nil {
					errors.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				if now.UnixNano() > killAt.Load() {
					stalls[t] = max(stalls[t], now.Sub(lastOK))
					after.Add(1)
				} else {
					before.Add(1)
				}
				lastOK = now
			}
		}(t)
	}
	time.Sleep(time.Duration(env("GROUP_WARMUP_MS", 3000)) * time.Millisecond)
	killAt.Store(time.Now().UnixNano())
	_ = syscall.Kill(env("GROUP_VICTIM_PID", 0), syscall.SIGKILL)
	time.Sleep(time.Duration(env("GROUP_AFTER_MS", 8000)) * time.Millisecond)
	close(stop)
	wg.Wait()
	var worst time.Duration
	for _, s := range stalls {
		worst = max(worst, s)
	}
	fmt.Printf("first error: %v\n", first.Load())
	fmt.Printf("group-failover: client=go-redis threads=%d requests_before_kill=%d requests_after_kill=%d errors=%d recovery_ms=%d\n",
		threads, before.Load(), after.Load(), errors.Load(), worst.Milliseconds())
}
