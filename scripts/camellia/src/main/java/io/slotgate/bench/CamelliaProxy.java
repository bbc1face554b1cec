// camellia-redis-proxy started the way its own CamelliaRedisProxyStarter does, without Spring:
// a port, a route (redis-cluster://@host:port,...) and the number of netty worker threads.
// Usage: CamelliaProxy PORT ROUTE [WORK_THREADS]; prints READY on stdout once listening.
package io.slotgate.bench;

import com.netease.nim.camellia.redis.proxy.util.CamelliaRedisProxyStarter;

public final class CamelliaProxy {
    private CamelliaProxy() {}

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: CamelliaProxy PORT ROUTE [WORK_THREADS]");
            System.exit(2);
        }
        CamelliaRedisProxyStarter.updatePort(Integer.parseInt(args[0]));
        CamelliaRedisProxyStarter.updateRouteConf(args[1]);
        if (args.length > 2) {
            int threads = Integer.parseInt(args[2]);
            // One acceptor thread; the workers are what serves clients and backends.
            CamelliaRedisProxyStarter.getServerProperties().setBossThread(1);
            CamelliaRedisProxyStarter.getServerProperties().setWorkThread(threads);
        }
        CamelliaRedisProxyStarter.start();
        if (!CamelliaRedisProxyStarter.isStart()) {
            System.err.println("camellia-redis-proxy did not start");
            System.exit(1);
        }
        System.out.println("READY");
        System.out.flush();
    }
}
