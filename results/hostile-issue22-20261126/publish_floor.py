#!/usr/bin/env python3
# The floor of hostile case huge-channel (docs/hostile.md): the same PUBLISH flood sent
# straight to a cluster, no proxy. Usage: slotgate cluster up --replicas 0 --node-timeout
# 15000, then publish_floor.py PORT PORT PORT (the masters). Prints the masters summed RSS growth.
import redis, threading, time, sys, os
from redis.cluster import RedisCluster
ports=[int(p) for p in sys.argv[1:]]
def rss():
    tot=0
    for p in ports:
        r=redis.Redis(port=p); tot+=int(r.info('memory')['used_memory_rss'])
    return tot
for p in ports:
    r=redis.Redis(port=p); r.config_set('client-output-buffer-limit','normal 1gb 1gb 0')
chan=b'x'*(10<<20)

class N: port=ports[0]
node=N
sub=redis.Redis(port=node.port).pubsub(); sub.subscribe(chan)
stop=time.time()+8
def reader():
    while time.time()<stop: sub.get_message(timeout=0.1)
threading.Thread(target=reader,daemon=True).start()
before=rss(); peak=before
pub=redis.Redis(port=node.port)
def sampler():
    global peak
    while time.time()<stop:
        peak=max(peak,rss()); time.sleep(0.005)
threading.Thread(target=sampler,daemon=True).start()
n=0
while time.time()<stop:
    p=pub.pipeline(transaction=False)
    for _ in range(8): p.publish(chan,b'hello')
    p.execute(); n+=8
print('publishes',n,'nodes growth MiB', (peak-before)>>20)
