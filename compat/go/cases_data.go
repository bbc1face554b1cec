// go-redis cases for the data side: handshake, every data type, multi-key commands across
// slots, pipelines, transactions and scripts (main.go runs them).
package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	added := m.c.SAdd(bg, k, "a", "b", "c").Val()
	got := m.c.SMembers(bg, k).Val()
	sort.Strings(got)
	return first(
		eq("SADD", added, int64(3)),
		eq("SISMEMBER", m.c.SIsMember(bg, k, "b").Val(), true),
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
