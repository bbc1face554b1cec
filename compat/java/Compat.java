// Jedis and Lettuce against slotgate, as applications use them: JedisPooled and JedisCluster,
// Lettuce RedisClient and RedisClusterClient, each in RESP2 and RESP3. Run by compat/run.py
// (COMPAT_PROXY=host:port) after javac; prints one
// `PASS|FAIL|SKIP <library>/<mode>/<resp>/<case>` line per case (see compat/run.py).

import io.lettuce.core.*;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.util.*;
import java.util.concurrent.*;
import redis.clients.jedis.*;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.util.KeyValue;

public class Compat {
    static final String[] ADDR = System.getenv().getOrDefault("COMPAT_PROXY", "127.0.0.1:7000").split(":");
    static final String HOST = ADDR[0];
    static final int PORT = Integer.parseInt(ADDR[1]);
    static final String PREFIX = System.getenv().getOrDefault("COMPAT_PREFIX", "cjava");

    static class Skip extends RuntimeException {
        Skip(String why) { super(why); }
    }

    interface Case { void run() throws Exception; }

    static void eq(String label, Object got, Object want) {
        if (!Objects.equals(got, want)) {
            String g = String.valueOf(got);
            throw new AssertionError(label + ": got " + (g.length() > 200 ? g.substring(0, 200) : g) + ", want " + want);
        }
    }

    static String bigValue() {
        byte[] raw = new byte[3 * 512 * 1024];
        new Random().nextBytes(raw);
        return Base64.getEncoder().encodeToString(raw); // 2 MiB
    }

    static void concurrently(int n, IntConsumerEx body) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int t = i;
            fs.add(pool.submit(() -> { body.accept(t); return null; }));
        }
        try {
            for (Future<?> f : fs) f.get(60, TimeUnit.SECONDS);
        } finally {
            pool.shutdownNow();
        }
    }

    interface IntConsumerEx { void accept(int i) throws Exception; }

    static String label;

    static void run(String name, Case c) {
        String l = label + "/" + name;
        try {
            c.run();
            System.out.println("PASS " + l);
        } catch (Skip s) {
            System.out.println("SKIP " + l + ": " + s.getMessage());
        } catch (Throwable e) {
            Throwable root = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            System.out.println("FAIL " + l + ": " + (root.getClass().getSimpleName() + ": " + root.getMessage()).replace('\n', ' '));
        }
        System.out.flush();
    }

    // === Jedis ===

    static void jedisMode(boolean cluster, RedisProtocol proto) {
        int resp = proto == RedisProtocol.RESP3 ? 3 : 2;
        label = "jedis/" + (cluster ? "cluster" : "plain") + "/resp" + resp;
        String p = PREFIX + ":jedis:" + (cluster ? "cluster" : "plain") + ":r" + resp + ":";
        DefaultJedisClientConfig cfg = DefaultJedisClientConfig.builder().protocol(proto).socketTimeoutMillis(15000).build();
        HostAndPort hp = new HostAndPort(HOST, PORT);
        UnifiedJedis j = cluster ? new JedisCluster(Set.of(hp), cfg) : new JedisPooled(hp, cfg);
        new JedisCases(j, cluster, p, cfg, hp).all();
        j.close();
    }

    // === Lettuce ===

    static void lettuceMode(boolean cluster, ProtocolVersion proto) throws Exception {
        int resp = proto == ProtocolVersion.RESP3 ? 3 : 2;
        label = "lettuce/" + (cluster ? "cluster" : "plain") + "/resp" + resp;
        String p = PREFIX + ":lettuce:" + (cluster ? "cluster" : "plain") + ":r" + resp + ":";
        RedisURI uri = RedisURI.create(HOST, PORT);
        if (cluster) {
            RedisClusterClient client = RedisClusterClient.create(uri);
            client.setOptions(ClusterClientOptions.builder().protocolVersion(proto).build());
            StatefulRedisClusterConnection<String, String> conn = client.connect();
            new LettuceCases(conn, conn.sync(), conn.async(), true, p, client::connectPubSub, () -> client.connect().sync()).all();
            conn.close();
            client.shutdown();
        } else {
            RedisClient client = RedisClient.create(uri);
            client.setOptions(ClientOptions.builder().protocolVersion(proto).build());
            StatefulRedisConnection<String, String> conn = client.connect();
            new LettuceCases(conn, conn.sync(), conn.async(), false, p, client::connectPubSub, () -> client.connect().sync()).all();
            conn.close();
            client.shutdown();
        }
    }

    public static void main(String[] args) throws Exception {
        for (boolean cluster : new boolean[] {false, true}) {
            for (RedisProtocol proto : new RedisProtocol[] {RedisProtocol.RESP2, RedisProtocol.RESP3}) {
                try {
                    jedisMode(cluster, proto);
                } catch (Throwable e) {
                    System.out.println("FAIL " + label + "/connect: " + e);
                }
            }
        }
        for (boolean cluster : new boolean[] {false, true}) {
            for (ProtocolVersion proto : new ProtocolVersion[] {ProtocolVersion.RESP2, ProtocolVersion.RESP3}) {
                try {
                    lettuceMode(cluster, proto);
                } catch (Throwable e) {
                    System.out.println("FAIL " + label + "/connect: " + e);
                }
            }
        }
        System.exit(0);
    }
}
