// ioredis and node-redis against slotgate, as applications use them: ioredis Redis and Cluster
// (RESP2: ioredis speaks no RESP3), node-redis createClient and createCluster in RESP2 and
// RESP3. Run by compat/run.py (COMPAT_PROXY=host:port); prints one
// `PASS|FAIL|SKIP <library>/<mode>/<resp>/<case>` line per case (see compat/run.py).
'use strict';
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const Redis = require('ioredis');
const { createClient, createCluster, WatchError } = require('redis');

const [HOST, PORT] = (process.env.COMPAT_PROXY || '127.0.0.1:7000').split(':');
const PREFIX = process.env.COMPAT_PREFIX || 'cnode';
const TIMEOUT_MS = 10000;

class Skip extends Error {}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(label, cond, ceilingMs = TIMEOUT_MS) {
  const deadline = Date.now() + ceilingMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${label}: not within ${ceilingMs} ms`);
    await sleep(10);
  }
}

// Maps, null-prototype objects and plain objects compare alike, keys sorted.
function norm(v) {
  if (v instanceof Map) v = Object.fromEntries(v);
  if (Array.isArray(v)) return v.map(norm);
  if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, norm(v[k])]));
  }
  return v;
}
const eq = (label, got, want) => assert.deepStrictEqual(norm(got), norm(want), label);
const bigValue = () => crypto.randomBytes(3 * 512 * 1024).toString('base64'); // 2 MiB

// Cases shared by both libraries through a tiny adapter `a`:
//   a.c (the client), a.make(opts) (another client of the same mode), a.key(name), a.cluster.
// Library-specific cases live in IOREDIS and NODE_REDIS below.
const COMMON = {
  async string(a) {
    const c = a.c, k = a.key('str');
    eq('SET', await c.set(k, 'v1'), 'OK');
    eq('GET', await c.get(k), 'v1');
    eq('APPEND', await c.append(k, '23'), 4);
    eq('INCRBY', await c.incrBy?.(a.key('ctr'), 5) ?? await c.incrby(a.key('ctr'), 5), 5);
    const ttl = (await c.expire(k, 100), await c.ttl(k));
    assert.ok(ttl > 0 && ttl <= 100, `TTL ${ttl}`);
  },
  async 'big-value-2mb'(a) {
    const v = bigValue(), k = a.key('big');
    eq('SET', await a.c.set(k, v), 'OK');
    assert.ok((await a.c.get(k)) === v, 'GET 2MB differs');
  },
  async 'concurrent-20'(a) {
    await Promise.all([...Array(20).keys()].map(async (i) => {
      for (let j = 0; j < 40; j++) {
        const k = a.key(`conc:${i}:${j}`);
        await a.c.set(k, `${i}-${j}`);
        eq('GET', await a.c.get(k), `${i}-${j}`);
      }
    }));
  },
  async health(a) {
    await a.c.set(a.key('health'), '1');
    eq('PING', await a.c.ping(), 'PONG');
    assert.match(await a.c.info(), /redis_version:/);
    assert.match(await a.c.info('keyspace'), /db0:keys=/);
  },
  async 'info-role-master'(a) {
    assert.match(await a.c.info('replication'), /role:master/);
  },
};

// === ioredis ===
const IOREDIS = {
  async handshake(a) {
    eq('PING', await a.c.ping(), 'PONG');
    eq('ECHO', await a.c.echo('hi'), 'hi');
    if (!a.cluster) {
      await a.c.client('SETNAME', 'compat-io');
      eq('CLIENT GETNAME', await a.c.client('GETNAME'), 'compat-io');
    }
  },
  async types(a) {
    const c = a.c;
    eq('HSET', await c.hset(a.key('h'), { a: '1', b: '2' }), 2);
    eq('HGETALL', await c.hgetall(a.key('h')), { a: '1', b: '2' });
    eq('RPUSH', await c.rpush(a.key('l'), 'a', 'b', 'c'), 3);
    eq('LRANGE', await c.lrange(a.key('l'), 0, -1), ['a', 'b', 'c']);
    eq('SADD', await c.sadd(a.key('s'), 'a', 'b'), 2);
    eq('SMEMBERS', (await c.smembers(a.key('s'))).sort(), ['a', 'b']);
    eq('ZADD', await c.zadd(a.key('z'), 1, 'a', 2.5, 'b'), 2);
    eq('ZRANGE', await c.zrange(a.key('z'), 0, -1, 'WITHSCORES'), ['a', '1', 'b', '2.5']);
    const id = await c.xadd(a.key('x'), '*', 'f', '1');
    eq('XRANGE', await c.xrange(a.key('x'), '-', '+'), [[id, ['f', '1']]]);
    await c.pfadd(a.key('hll'), 'a', 'b', 'c', 'a');
    eq('PFCOUNT', await c.pfcount(a.key('hll')), 3);
    await c.geoadd(a.key('g'), 13.361389, 38.115556, 'Palermo', 15.087269, 37.502669, 'Catania');
    eq('GEODIST', Math.round(Number(await c.geodist(a.key('g'), 'Palermo', 'Catania', 'km'))), 166);
    await c.setbit(a.key('b'), 100, 1);
    eq('BITCOUNT', await c.bitcount(a.key('b')), 1);
  },
  async 'crossslot-multikey'(a) {
    const keys = [...Array(12).keys()].map((i) => a.key(`mk${i}`));
    eq('MSET', await a.c.mset(...keys.flatMap((k, i) => [k, `v${i}`])), 'OK');
    eq('MGET', await a.c.mget(...keys), keys.map((_, i) => `v${i}`));
    eq('DEL', await a.c.del(...keys), 12);
  },
  async 'pipeline-160'(a) {
    const p = a.c.pipeline();
    for (let i = 0; i < 160; i++) p.set(a.key(`p${i}`), i);
    for (let i = 0; i < 160; i++) p.incr(a.key(`p${i}`));
    const out = await p.exec();
    eq('INCRs', out.slice(160).map(([e, v]) => e || v), [...Array(160).keys()].map((i) => i + 1));
  },
  async 'multi-exec'(a) {
    const k = `{${a.key('tx')}}a`;
    eq('EXEC', await a.c.multi().set(k, 1).incr(k).get(k).exec(), [[null, 'OK'], [null, 2], [null, '2']]);
  },
  async watch(a) {
    if (a.cluster) throw new Skip('ioredis Cluster keeps no connection for WATCH');
    const k = a.key('watched'), other = a.make();
    await a.c.set(k, '0');
    await a.c.watch(k);
    await other.set(k, 'changed');
    eq('EXEC after a change', await a.c.multi().set(k, 'mine').exec(), null);
    eq('value', await a.c.get(k), 'changed');
    other.disconnect();
  },
  async script(a) {
    const k = a.key('script'), src = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    eq('EVAL', await a.c.eval(src, 1, k, 3), 3);
    a.c.defineCommand('compatIncr', { numberOfKeys: 1, lua: src }); // EVALSHA, then EVAL
    eq('defined command', await a.c.compatIncr(k, 4), 7);
  },
  async pubsub(a) { await ioPubsub(a, false); },
  async 'sharded-pubsub'(a) { await ioPubsub(a, true); },
  async 'blocking-pop'(a) {
    const k = a.key('blk'), pusher = a.make();
    eq('BLPOP on empty', await a.c.blpop(k, 0.2), null);
    setTimeout(() => pusher.rpush(k, 'late'), 200);
    eq('BLPOP woken', await a.c.blpop(k, 10), [k, 'late']);
    pusher.disconnect();
  },
  async scan(a) {
    const want = [...Array(60).keys()].map((i) => a.key(`scan:${i}`));
    for (const k of want) await a.c.set(k, '1');
    const nodes = a.cluster ? a.c.nodes('master') : [a.c];
    const got = new Set();
    for (const n of nodes) {
      for await (const keys of n.scanStream({ match: a.key('scan:*'), count: 25 })) keys.forEach((k) => got.add(k));
    }
    eq('SCAN', [...got].sort(), want.sort());
  },
  async 'replica-read'(a) {
    const k = a.key('ro');
    await a.c.set(k, 'seen');
    const r = a.cluster ? a.make({ scaleReads: 'slave' }) : a.make();
    if (!a.cluster) eq('READONLY', await r.readonly(), 'OK');
    eq('read', await r.get(k), 'seen');
    r.disconnect();
  },
  async 'wait-replica'(a) {
    if (a.cluster) throw new Skip('checked with the plain client');
    if (process.env.COMPAT_REPLICAS === '0') throw new Skip('the servers have no replica');
    await a.c.set(a.key('wait'), '1');
    const n = await a.c.wait(1, 0);
    assert.ok(n >= 1, `WAIT 1 0 answered ${n}`);
  },
};

async function ioPubsub(a, sharded) {
  const ch = a.key(sharded ? 'schan' : 'chan');
  const sub = a.make(sharded && a.cluster ? { shardedSubscribers: true } : {});
  const got = [];
  sub.on(sharded ? 'smessage' : 'message', (c, m) => got.push([c, m]));
  await (sharded ? sub.ssubscribe(ch) : sub.subscribe(ch));
  eq('receivers', await (sharded ? a.c.spublish(ch, 'hello') : a.c.publish(ch, 'hello')), 1);
  await until('message', () => got.length > 0);
  eq('message', got[0], [ch, 'hello']);
  sub.disconnect();
}

// === node-redis ===
const NODE_REDIS = {
  async handshake(a) {
    eq('PING', await a.c.ping(), 'PONG');
    if (!a.cluster) {
      eq('ECHO', await a.c.echo('hi'), 'hi');
      await a.c.clientSetName('compat-nr');
      eq('CLIENT GETNAME', await a.c.clientGetName(), 'compat-nr');
      const hello = norm(await a.c.hello(a.resp));
      eq('HELLO proto', hello.proto, a.resp);
    }
  },
  async types(a) {
    const c = a.c;
    eq('HSET', await c.hSet(a.key('h'), { a: '1', b: '2' }), 2);
    eq('HGETALL', await c.hGetAll(a.key('h')), { a: '1', b: '2' });
    eq('RPUSH', await c.rPush(a.key('l'), ['a', 'b', 'c']), 3);
    eq('LRANGE', await c.lRange(a.key('l'), 0, -1), ['a', 'b', 'c']);
    eq('SADD', await c.sAdd(a.key('s'), ['a', 'b']), 2);
    eq('SMEMBERS', [...(await c.sMembers(a.key('s')))].sort(), ['a', 'b']);
    eq('ZADD', await c.zAdd(a.key('z'), [{ score: 1, value: 'a' }, { score: 2.5, value: 'b' }]), 2);
    eq('ZRANGE', await c.zRangeWithScores(a.key('z'), 0, -1), [{ value: 'a', score: 1 }, { value: 'b', score: 2.5 }]);
    const id = await c.xAdd(a.key('x'), '*', { f: '1' });
    eq('XRANGE', await c.xRange(a.key('x'), '-', '+'), [{ id, message: { f: '1' } }]);
    await c.pfAdd(a.key('hll'), ['a', 'b', 'c', 'a']);
    eq('PFCOUNT', await c.pfCount(a.key('hll')), 3);
    await c.geoAdd(a.key('g'), [{ longitude: 13.361389, latitude: 38.115556, member: 'Palermo' },
      { longitude: 15.087269, latitude: 37.502669, member: 'Catania' }]);
    eq('GEODIST', Math.round(Number(await c.geoDist(a.key('g'), 'Palermo', 'Catania', 'km'))), 166);
    await c.setBit(a.key('b'), 100, 1);
    eq('BITCOUNT', await c.bitCount(a.key('b')), 1);
  },
  async 'crossslot-multikey'(a) {
    // createCluster sends a multi-key command to its first key's node: the proxy, which splits it.
    const keys = [...Array(12).keys()].map((i) => a.key(`mk${i}`));
    eq('MSET', await a.c.mSet(keys.map((k, i) => [k, `v${i}`])), 'OK');
    eq('MGET', await a.c.mGet(keys), keys.map((_, i) => `v${i}`));
    eq('DEL', await a.c.del(keys), 12);
  },
  async 'pipeline-160'(a) {
    // node-redis pipelines every command issued in the same tick; multi().execAsPipeline() too.
    const sets = [...Array(160).keys()].map((i) => a.c.set(a.key(`p${i}`), String(i)));
    const incrs = [...Array(160).keys()].map((i) => a.c.incr(a.key(`p${i}`)));
    eq('SETs', await Promise.all(sets), Array(160).fill('OK'));
    eq('INCRs', await Promise.all(incrs), [...Array(160).keys()].map((i) => i + 1));
    const k = `{${a.key('pp')}}`;
    const m = a.c.multi();
    for (let i = 0; i < 160; i++) m.incr(k);
    eq('execAsPipeline', (await m.execAsPipeline()).at(-1), 160);
  },
  async 'multi-exec'(a) {
    const k = `{${a.key('tx')}}a`;
    eq('EXEC', await a.c.multi().set(k, '1').incr(k).get(k).exec(), ['OK', 2, '2']);
  },
  async watch(a) {
    if (a.cluster) throw new Skip('checked with createClient');
    const k = a.key('watched'), mine = await a.make(), other = await a.make();
    await mine.set(k, '0');
    await mine.watch(k);
    await other.set(k, 'changed');
    await assert.rejects(mine.multi().set(k, 'mine').exec(), WatchError);
    eq('value', await mine.get(k), 'changed');
    await mine.close(); await other.close();
  },
  async script(a) {
    const k = a.key('script'), src = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    eq('EVAL', await a.c.eval(src, { keys: [k], arguments: ['3'] }), 3);
    if (a.cluster) return;
    const sha = await a.c.scriptLoad(src);
    eq('EVALSHA', await a.c.evalSha(sha, { keys: [k], arguments: ['4'] }), 7);
  },
  async pubsub(a) { await nrPubsub(a, false); },
  async 'sharded-pubsub'(a) { await nrPubsub(a, true); },
  async 'blocking-pop'(a) {
    const k = a.key('blk'), pusher = await a.make();
    eq('BLPOP on empty', await a.c.blPop(k, 0.2), null);
    setTimeout(() => pusher.rPush(k, 'late'), 200);
    eq('BLPOP woken', await a.c.blPop(k, 10), { key: k, element: 'late' });
    await pusher.close();
  },
  async scan(a) {
    const want = [...Array(60).keys()].map((i) => a.key(`scan:${i}`));
    for (const k of want) await a.c.set(k, '1');
    const nodes = a.cluster ? await Promise.all(a.c.masters.map((m) => a.c.nodeClient(m))) : [a.c];
    const got = new Set();
    for (const n of nodes) {
      for await (const keys of n.scanIterator({ MATCH: a.key('scan:*'), COUNT: 25 })) keys.forEach((k) => got.add(k));
    }
    eq('SCAN', [...got].sort(), want.sort());
  },
  async 'replica-read'(a) {
    const k = a.key('ro');
    await a.c.set(k, 'seen');
    const r = await a.make(a.cluster ? { useReplicas: true } : {});
    if (!a.cluster) eq('READONLY', await r.readonly(), 'OK');
    eq('read', await r.get(k), 'seen');
    await r.close();
  },
  async 'wait-replica'(a) {
    if (a.cluster) throw new Skip('checked with createClient');
    if (process.env.COMPAT_REPLICAS === '0') throw new Skip('the servers have no replica');
    await a.c.set(a.key('wait'), '1');
    const n = await a.c.wait(1, 0);
    assert.ok(n >= 1, `WAIT 1 0 answered ${n}`);
  },
  async 'keyspace-all-masters'(a) {
    if (a.cluster) throw new Skip('checked with createClient');
    const sub = await a.make(), seen = new Set();
    await sub.pSubscribe(`__keyspace@0__:*${a.key('ks')}`, (_msg, ch) => seen.add(ch.split(':').slice(1).join(':')));
    const keys = ['b', 'c', 'a'].map((t) => `{${t}}${a.key('ks')}`); // one key per master
    for (const k of keys) await a.c.set(k, '1');
    await until('events from all 3 masters', () => seen.size === 3).catch((e) => {
      throw new Error(`${e.message}: saw ${[...seen]}`);
    });
    await sub.close();
  },
  async 'client-tracking'(a) {
    if (a.resp !== 3) throw new Skip('clientSideCache needs RESP3');
    // No reconnect loop and a ceiling on connect: the handshake sends CLIENT TRACKING.
    const noRetry = { socket: { reconnectStrategy: false } };
    const opts = { clientSideCache: { ttl: 0, maxEntries: 100 }, ...(a.cluster ? { defaults: noRetry } : noRetry) };
    const cached = await Promise.race([a.make(opts),
      sleep(5000).then(() => { throw new Error('connect with clientSideCache did not complete in 5 s'); })]);
    const k = a.key('csc');
    await a.c.set(k, 'old');
    eq('first read', await cached.get(k), 'old');
    eq('cached read', await cached.get(k), 'old');
    await a.c.set(k, 'new');
    await until('invalidation', async () => (await cached.get(k)) === 'new', 100);
    await cached.close();
  },
};

async function nrPubsub(a, sharded) {
  const ch = a.key(sharded ? 'schan' : 'chan'), got = [];
  const sub = a.cluster ? a.c : await a.make(); // a cluster keeps its own subscriber connections
  await (sharded ? sub.sSubscribe(ch, (m, c) => got.push([c, m])) : sub.subscribe(ch, (m, c) => got.push([c, m])));
  const pub = a.cluster ? a.c : await a.make();
  eq('receivers', await (sharded ? pub.sPublish(ch, 'hello') : pub.publish(ch, 'hello')), 1);
  await until('message', () => got.length > 0);
  eq('message', got[0], [ch, 'hello']);
  await (sharded ? sub.sUnsubscribe(ch) : sub.unsubscribe(ch));
  if (!a.cluster) { await sub.close(); await pub.close(); }
}

// === modes ===
const url = `redis://${HOST}:${PORT}`;

function ioredisMode(cluster) {
  const make = (opts = {}) => (cluster
    ? new Redis.Cluster([{ host: HOST, port: Number(PORT) }], { ...opts, redisOptions: { maxRetriesPerRequest: 2 } })
    : new Redis({ host: HOST, port: Number(PORT), maxRetriesPerRequest: 2, ...opts }));
  return { lib: 'ioredis', name: cluster ? 'cluster' : 'plain', resp: 2, cluster, make, cases: { ...COMMON, ...IOREDIS },
    close: (c) => c.disconnect() };
}

function nodeRedisMode(cluster, resp) {
  const make = async (opts = {}) => {
    const c = cluster
      ? createCluster({ rootNodes: [{ url }], RESP: resp, ...opts })
      : createClient({ url, RESP: resp, ...opts });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  return { lib: 'node-redis', name: cluster ? 'cluster' : 'plain', resp, cluster, make, cases: { ...COMMON, ...NODE_REDIS },
    close: (c) => c.close() };
}

async function runMode(m) {
  const prefix = `${m.lib}/${m.name}/resp${m.resp}`;
  let c;
  try {
    c = await m.make();
  } catch (e) {
    console.log(`FAIL ${prefix}/connect: ${e.message}`);
    return;
  }
  const a = { c, make: m.make, cluster: m.cluster, resp: m.resp, key: (n) => `${PREFIX}:${m.lib}:${m.name}:r${m.resp}:${n}` };
  for (const [name, fn] of Object.entries(m.cases)) {
    try {
      await Promise.race([fn(a), sleep(30000).then(() => { throw new Error('case hung for 30 s'); })]);
      console.log(`PASS ${prefix}/${name}`);
    } catch (e) {
      if (e instanceof Skip) console.log(`SKIP ${prefix}/${name}: ${e.message}`);
      else console.log(`FAIL ${prefix}/${name}: ${String(e.message).replace(/\s+/g, ' ').slice(0, 400)}`);
    }
  }
  try { await m.close(c); } catch { /* a failed case may have closed it */ }
}

async function main() {
  const modes = [ioredisMode(false), ioredisMode(true)];
  for (const cluster of [false, true]) for (const resp of [2, 3]) modes.push(nodeRedisMode(cluster, resp));
  for (const m of modes) await runMode(m);
  process.exit(0); // subscribers a failed case left open must not keep node alive
}

main().catch((e) => { console.error(e); process.exit(1); });
