// Jedis cases (JedisPooled and JedisCluster, RESP2 and RESP3); Compat.java runs them.

import io.lettuce.core.*;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.util.*;
import java.util.concurrent.*;
import redis.clients.jedis.*;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.util.KeyValue;

class JedisCases {
    final UnifiedJedis j;
    final boolean cluster;
    final String p;
    final JedisClientConfig cfg;
    final HostAndPort hp;

    JedisCases(UnifiedJedis j, boolean cluster, String p, JedisClientConfig cfg, HostAndPort hp) {
        this.j = j; this.cluster = cluster; this.p = p; this.cfg = cfg; this.hp = hp;
    }

    /** A plain Jedis on one connection: what applications use for WATCH, INFO, READONLY. */
    Jedis single() { return new Jedis(hp, cfg); }

    void all() {
        connectionAndData();
        batches();
        messaging();
        service();
    }

    void connectionAndData() {
        Compat.run("handshake", () -> {
            Compat.eq("PING", j.ping(), "PONG");
            try (Jedis s = single()) {
                Compat.eq("ECHO", s.echo("hi"), "hi");
                s.clientSetname("compat-jedis");
                Compat.eq("CLIENT GETNAME", s.clientGetname(), "compat-jedis");
            }
        });
        Compat.run("types", () -> {
            Compat.eq("SET", j.set(p + "s", "v1"), "OK");
            Compat.eq("GET", j.get(p + "s"), "v1");
            Compat.eq("INCRBY", j.incrBy(p + "ctr", 5), 5L);
            Compat.eq("HSET", j.hset(p + "h", Map.of("a", "1", "b", "2")), 2L);
            Compat.eq("HGETALL", j.hgetAll(p + "h"), Map.of("a", "1", "b", "2"));
            Compat.eq("RPUSH", j.rpush(p + "l", "a", "b", "c"), 3L);
            Compat.eq("LRANGE", j.lrange(p + "l", 0, -1), List.of("a", "b", "c"));
            Compat.eq("SADD", j.sadd(p + "set", "a", "b"), 2L);
            Compat.eq("SMEMBERS", j.smembers(p + "set"), Set.of("a", "b"));
            Compat.eq("ZADD", j.zadd(p + "z", Map.of("a", 1.0, "b", 2.5)), 2L);
            Compat.eq("ZSCORE", j.zscore(p + "z", "b"), 2.5);
            Compat.eq("ZRANGE", j.zrange(p + "z", 0, -1), List.of("a", "b"));
            j.xadd(p + "x", StreamEntryID.NEW_ENTRY, Map.of("f", "1"));
            Compat.eq("XRANGE", j.xrange(p + "x", "-", "+").get(0).getFields(), Map.of("f", "1"));
            j.pfadd(p + "hll", "a", "b", "c", "a");
            Compat.eq("PFCOUNT", j.pfcount(p + "hll"), 3L);
            j.geoadd(p + "g", 13.361389, 38.115556, "Palermo");
            j.geoadd(p + "g", 15.087269, 37.502669, "Catania");
            Compat.eq("GEODIST", Math.round(j.geodist(p + "g", "Palermo", "Catania", redis.clients.jedis.args.GeoUnit.KM)), 166L);
            j.setbit(p + "b", 100, true);
            Compat.eq("BITCOUNT", j.bitcount(p + "b"), 1L);
        });
        Compat.run("crossslot-multikey", () -> {
            if (cluster) throw new Compat.Skip("JedisCluster refuses keys of different slots before sending");
            String[] kv = new String[24];
            String[] keys = new String[12];
            for (int i = 0; i < 12; i++) { keys[i] = p + "mk" + i; kv[2 * i] = keys[i]; kv[2 * i + 1] = "v" + i; }
            Compat.eq("MSET", j.mset(kv), "OK");
            Compat.eq("MGET", j.mget(keys).get(11), "v11");
            Compat.eq("DEL", j.del(keys), 12L);
        });
    }

    void batches() {
        Compat.run("pipeline-160", () -> {
            List<Response<Long>> rs = new ArrayList<>();
            try (AbstractPipeline pl = j.pipelined()) {
                for (int i = 0; i < 160; i++) pl.set(p + "p" + i, String.valueOf(i));
                for (int i = 0; i < 160; i++) rs.add(pl.incr(p + "p" + i));
                pl.sync();
            }
            for (int i = 0; i < 160; i++) Compat.eq("INCR " + i, rs.get(i).get(), (long) i + 1);
        });
        Compat.run("multi-exec", () -> {
            String k = "{" + p + "tx}a";
            try (AbstractTransaction tx = j.multi()) {
                tx.set(k, "1");
                tx.incr(k);
                tx.get(k);
                Compat.eq("EXEC", tx.exec(), List.of("OK", 2L, "2"));
            } catch (UnsupportedOperationException e) {
                throw new Compat.Skip("JedisCluster 5.2 has no transactions (multi() is unsupported)");
            }
        });
        Compat.run("watch", () -> {
            if (cluster) throw new Compat.Skip("checked with the plain client");
            String k = p + "watched";
            try (Jedis s = single()) {
                s.set(k, "0");
                s.watch(k);
                j.set(k, "changed");
                Transaction tx = s.multi();
                tx.set(k, "mine");
                Compat.eq("EXEC after a change", tx.exec(), null);
                Compat.eq("value", s.get(k), "changed");
            }
        });
        Compat.run("script", () -> {
            String k = p + "script", src = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
            Compat.eq("EVAL", j.eval(src, List.of(k), List.of("3")), 3L);
            String sha = j.scriptLoad(src, k);
            Compat.eq("EVALSHA", j.evalsha(sha, List.of(k), List.of("4")), 7L);
        });
    }

    void messaging() {
        Compat.run("pubsub", () -> pubsub(false));
        Compat.run("sharded-pubsub", () -> pubsub(true));
        Compat.run("blocking-pop", () -> {
            String k = p + "blk";
            Compat.eq("BLPOP on empty", j.blpop(0.2, k), null);
            new Timer(true).schedule(new TimerTask() { public void run() { j.rpush(k, "late"); } }, 200);
            KeyValue<String, String> kv = j.blpop(10.0, k);
            Compat.eq("BLPOP woken", kv == null ? null : kv.getKey() + "=" + kv.getValue(), k + "=late");
        });
        Compat.run("scan", () -> {
            Set<String> want = new HashSet<>();
            for (int i = 0; i < 60; i++) { want.add(p + "scan:" + i); j.set(p + "scan:" + i, "1"); }
            Set<String> got = new HashSet<>();
            try (Jedis s = single()) {
                String cur = ScanParams.SCAN_POINTER_START;
                do {
                    ScanResult<String> r = s.scan(cur, new ScanParams().match(p + "scan:*").count(25));
                    got.addAll(r.getResult());
                    cur = r.getCursor();
                } while (!cur.equals("0"));
            }
            Compat.eq("SCAN", got, want);
        });
    }

    void service() {
        Compat.run("concurrent-20", () -> Compat.concurrently(20, t -> {
            for (int i = 0; i < 40; i++) {
                j.set(p + "conc:" + t + ":" + i, t + "-" + i);
                Compat.eq("GET", j.get(p + "conc:" + t + ":" + i), t + "-" + i);
            }
        }));
        Compat.run("big-value-2mb", () -> {
            String v = Compat.bigValue();
            j.set(p + "big", v);
            Compat.eq("GET 2MB equal", v.equals(j.get(p + "big")), true);
        });
        Compat.run("health", () -> {
            j.set(p + "health", "1");
            try (Jedis s = single()) {
                Compat.eq("PING", s.ping(), "PONG");
                Compat.eq("INFO redis_version", s.info().contains("redis_version:"), true);
                Compat.eq("INFO keyspace", s.info("keyspace").contains("db0:keys="), true);
            }
        });
        Compat.run("replica-read", () -> {
            if (cluster) throw new Compat.Skip("JedisCluster 5.2 has no replica-read setting");
            j.set(p + "ro", "seen");
            try (Jedis s = single()) {
                Compat.eq("READONLY", s.readonly(), "OK");
                Compat.eq("read", s.get(p + "ro"), "seen");
            }
        });
        Compat.run("info-role-master", () -> {
            try (Jedis s = single()) {
                Compat.eq("INFO replication role:master", s.info("replication").contains("role:master"), true);
            }
        });
        Compat.run("wait-replica", () -> {
            if (cluster) throw new Compat.Skip("checked with the plain client");
            if ("0".equals(System.getenv("COMPAT_REPLICAS"))) throw new Compat.Skip("the servers have no replica");
            try (Jedis s = single()) {
                s.set(p + "wait", "1");
                long n = s.waitReplicas(1, 0);
                if (n < 1) throw new AssertionError("WAIT 1 0 answered " + n);
            }
        });
    }

    void pubsub(boolean sharded) throws Exception {
        String ch = p + (sharded ? "schan" : "chan");
        BlockingQueue<String> got = new LinkedBlockingQueue<>();
        CountDownLatch subscribed = new CountDownLatch(1);
        Thread t;
        if (sharded && !cluster) throw new Compat.Skip("Jedis 5.2 has sharded pub/sub on JedisCluster only");
        if (sharded) {
            JedisShardedPubSub sub = new JedisShardedPubSub() {
                public void onSMessage(String c, String m) { got.add(c + "|" + m); sunsubscribe(); }
                public void onSSubscribe(String c, int n) { subscribed.countDown(); }
            };
            t = new Thread(() -> ((JedisCluster) j).ssubscribe(sub, ch));
        } else {
            JedisPubSub sub = new JedisPubSub() {
                public void onMessage(String c, String m) { got.add(c + "|" + m); unsubscribe(); }
                public void onSubscribe(String c, int n) { subscribed.countDown(); }
            };
            t = new Thread(() -> j.subscribe(sub, ch));
        }
        t.setDaemon(true);
        t.start();
        if (!subscribed.await(10, TimeUnit.SECONDS)) throw new AssertionError("no subscribe confirmation");
        Compat.eq("receivers", sharded ? ((JedisCluster) j).spublish(ch, "hello") : j.publish(ch, "hello"), 1L);
        Compat.eq("message", got.poll(10, TimeUnit.SECONDS), ch + "|hello");
        t.join(10000);
    }
}
