package io.slotgate.bench;

import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.LockSupport;

import redis.clients.jedis.ConnectionPoolConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;

/**
 * Open-loop get/set load through one shared JedisCluster, for `slotgate bench scenario reshard
 * --via jedis`. Each client is one thread that sends at its own fixed schedule (rate / clients
 * per second); latency counts from the intended send time, so a stalled client is not hidden.
 *
 * <p>Protocol with the caller: one line {@code READY} on stdout once the client is connected
 * and warmed up (the measured load starts right after), then one JSON line at the end.
 * Everything else goes to stderr.
 */
public final class JedisReshardLoad {

    /** Per-client results: one long per request, (second << 32) | latency µs, and errors. */
    static final class Client {
        long[] samples = new long[1024];
        int n;
        final Map<String, Long> errors = new HashMap<>();
        final Map<String, String> errorSample = new HashMap<>();
        final TreeMap<Integer, Long> errorsPerSecond = new TreeMap<>();
        long getMisses;

        void ok(int second, long us) {
            if (n == samples.length) {
                samples = Arrays.copyOf(samples, n * 2);
            }
            samples[n++] = ((long) second << 32) | Math.min(us, 0xFFFF_FFFFL);
        }

        void error(int second, Throwable e) {
            String k = e.getClass().getSimpleName();
            errors.merge(k, 1L, Long::sum);
            errorSample.putIfAbsent(k, String.valueOf(e.getMessage()));
            errorsPerSecond.merge(second, 1L, Long::sum);
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = parse(argv);
        HostAndPort seed = HostAndPort.from(a.getOrDefault("seed", "127.0.0.1:30001"));
        int clients = Integer.parseInt(a.getOrDefault("clients", "100"));
        double rate = Double.parseDouble(a.getOrDefault("rate", "5000"));
        long durationMs = Long.parseLong(a.getOrDefault("duration-ms", "20000"));
        int keyspace = Integer.parseInt(a.getOrDefault("keyspace", "30000"));
        String prefix = a.getOrDefault("key-prefix", "key:");
        int valueSize = Integer.parseInt(a.getOrDefault("value-size", "64"));
        long rngSeed = Long.parseLong(a.getOrDefault("rng-seed", "1"));
        int getWeight = Integer.parseInt(a.getOrDefault("get-weight", "9"));
        int setWeight = Integer.parseInt(a.getOrDefault("set-weight", "1"));
        int warmup = Integer.parseInt(a.getOrDefault("warmup", "20000"));

        // Same names as `slotgate bench run`: prefix + key index as 12 zero-padded digits.
        String[] keys = new String[keyspace];
        for (int i = 0; i < keyspace; i++) {
            keys[i] = prefix + String.format("%012d", i);
        }
        String value = "x".repeat(valueSize);

        // JedisCluster's defaults (timeouts 2 s, 5 attempts, no periodic topology refresh),
        // except the pool: the default 8 connections per node would make 100 client threads
        // queue for connections; `clients` per node lets each thread hold its own, as the
        // other paths' clients each hold theirs.
        ConnectionPoolConfig pool = new ConnectionPoolConfig();
        pool.setMaxTotal(clients);
        pool.setMaxIdle(clients);
        JedisCluster jc = new JedisCluster(java.util.Set.of(seed),
                DefaultJedisClientConfig.builder().build(), JedisCluster.DEFAULT_MAX_ATTEMPTS, pool);

        warm(jc, keys, warmup, Math.min(clients, 10));
        System.out.println("READY");
        System.out.flush();

        Client[] results = new Client[clients];
        Thread[] threads = new Thread[clients];
        long intervalNs = (long) (1e9 * clients / rate);
        // The schedule starts once every thread exists (starting 100 threads takes a while).
        CountDownLatch created = new CountDownLatch(clients);
        long[] startAt = new long[1];
        CountDownLatch go = new CountDownLatch(1);
        int total = getWeight + setWeight;
        for (int c = 0; c < clients; c++) {
            final int id = c;
            final Client r = new Client();
            results[c] = r;
            threads[c] = new Thread(() -> {
                SplittableRandom rng = new SplittableRandom(rngSeed * 1_000_003L + id);
                created.countDown();
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                long start = startAt[0];
                long end = start + durationMs * 1_000_000L;
                long intended = start + intervalNs * id / clients; // staggered schedules
                while (intended < end) {
                    long wait = intended - System.nanoTime();
                    if (wait > 0) {
                        LockSupport.parkNanos(wait);
                        while (System.nanoTime() < intended) {
                            Thread.onSpinWait();
                        }
                    }
                    int second = (int) ((intended - start) / 1_000_000_000L);
                    String key = keys[rng.nextInt(keyspace)];
                    try {
                        if (rng.nextInt(total) < getWeight) {
                            if (jc.get(key) == null) {
                                r.getMisses++;
                            }
                        } else {
                            jc.set(key, value);
                        }
                        r.ok(second, (System.nanoTime() - intended) / 1000);
                    } catch (RuntimeException e) {
                        r.error(second, e);
                    }
                    intended += intervalNs;
                }
            }, "client-" + c);
            threads[c].start();
        }
        created.await();
        startAt[0] = System.nanoTime() + 2_000_000L;
        go.countDown(); // happens-before: every thread sees startAt[0]
        for (Thread t : threads) {
            t.join();
        }
        jc.close();
        System.out.println(report(results, durationMs, clients, rate));
        System.out.flush();
    }

    /** GETs before the measured load, so the JIT has compiled the request path. */
    static void warm(JedisCluster jc, String[] keys, int n, int threads) throws InterruptedException {
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                for (int i = id; i < n; i += threads) {
                    try {
                        jc.get(keys[i % keys.length]);
                    } catch (RuntimeException e) {
                        // warm-up only
                    }
                }
            });
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
    }

    static String report(Client[] results, long durationMs, int clients, double rate) {
        int ok = 0;
        long misses = 0;
        TreeMap<String, Long> errors = new TreeMap<>();
        TreeMap<String, String> samples = new TreeMap<>();
        TreeMap<Integer, Long> errPerSec = new TreeMap<>();
        for (Client r : results) {
            ok += r.n;
            misses += r.getMisses;
            r.errors.forEach((k, v) -> errors.merge(k, v, Long::sum));
            r.errorSample.forEach(samples::putIfAbsent);
            r.errorsPerSecond.forEach((k, v) -> errPerSec.merge(k, v, Long::sum));
        }
        long[] all = new long[ok];
        int at = 0;
        for (Client r : results) {
            System.arraycopy(r.samples, 0, all, at, r.n);
            at += r.n;
        }
        Arrays.sort(all); // by second, then latency
        long[] lat = new long[ok];
        for (int i = 0; i < ok; i++) {
            lat[i] = all[i] & 0xFFFF_FFFFL;
        }
        long errTotal = errors.values().stream().mapToLong(Long::longValue).sum();
        StringBuilder perSec = new StringBuilder();
        int seconds = (int) ((durationMs + 999) / 1000);
        int i = 0;
        for (int s = 0; s < seconds; s++) {
            int from = i;
            while (i < all.length && (all[i] >>> 32) == s) {
                i++;
            }
            long[] sec = Arrays.copyOfRange(lat, from, i);
            Arrays.sort(sec);
            if (s > 0) {
                perSec.append(',');
            }
            perSec.append(String.format("{\"t\":%d,\"ok\":%d,\"errors\":%d,\"p99_us\":%d}",
                    s, sec.length, errPerSec.getOrDefault(s, 0L), pct(sec, 0.99)));
        }
        Arrays.sort(lat);
        StringBuilder errs = new StringBuilder("{\"total\":" + errTotal);
        errors.forEach((k, v) -> errs.append(",\"").append(esc(k)).append("\":").append(v));
        errs.append('}');
        StringBuilder errSamples = new StringBuilder("{");
        samples.forEach((k, v) -> {
            if (errSamples.length() > 1) {
                errSamples.append(',');
            }
            errSamples.append('"').append(esc(k)).append("\":\"").append(esc(v)).append('"');
        });
        errSamples.append('}');
        return String.format(
                "{\"client\":\"jedis\",\"jedis_version\":\"%s\",\"clients\":%d,\"rate\":%s,"
                        + "\"requests\":%d,\"ok\":%d,\"errors\":%s,\"error_samples\":%s,"
                        + "\"get_misses\":%d,\"throughput_rps\":%.1f,\"p50_us\":%d,\"p99_us\":%d,"
                        + "\"p999_us\":%d,\"max_us\":%d,\"per_second\":[%s]}",
                esc(jedisVersion()), clients, rate, ok + errTotal, ok, errs, errSamples, misses,
                (ok + errTotal) * 1000.0 / durationMs, pct(lat, 0.5), pct(lat, 0.99),
                pct(lat, 0.999), lat.length == 0 ? 0 : lat[lat.length - 1], perSec);
    }

    static long pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int idx = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(idx, sorted.length - 1))];
    }

    static String jedisVersion() {
        try (InputStream in = JedisReshardLoad.class.getResourceAsStream("/jedis-reshard-load.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("jedis.version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    static String esc(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        List<String> args = new ArrayList<>(Arrays.asList(argv));
        for (int i = 0; i < args.size(); i++) {
            String s = args.get(i);
            if (!s.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + s);
            }
            int eq = s.indexOf('=');
            if (eq > 0) {
                m.put(s.substring(2, eq), s.substring(eq + 1));
            } else if (i + 1 < args.size()) {
                m.put(s.substring(2), args.get(++i));
            } else {
                throw new IllegalArgumentException("missing value for " + s);
            }
        }
        return m;
    }
}
