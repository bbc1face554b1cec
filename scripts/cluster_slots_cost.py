#!/usr/bin/env python3
"""The proxy's own CPU per CLUSTER SLOTS with 3 and with 100 masters behind it (the
reply is pre-encoded, so it must not grow). Needs target/release/slotgate."""
import glob, subprocess, time, re, os, sys
S="/work/main/target/release/slotgate"
def cpu(pid): return sum(int(open(t+"/schedstat").read().split()[0]) for t in glob.glob(f"/proc/{pid}/task/*"))
for masters, port in [(3, 7861), (100, 7862)]:
    d=f"/tmp/csc{masters}"; subprocess.run(["rm","-rf",d])
    out=subprocess.run([S,"cluster","up","--masters",str(masters),"--replicas","0","--dir",d],capture_output=True,text=True).stdout
    seed=re.search(r"seed: *(\S+)",out).group(1)
    p=subprocess.Popen(["taskset","-c","1",S,"proxy","--listen",f"127.0.0.1:{port}","--seed",seed,"--threads","1"],stderr=subprocess.DEVNULL,env=dict(os.environ,RUST_LOG="warn"))
    time.sleep(1.5)
    for rep in range(3):
        a=cpu(p.pid); n=20000
        r=subprocess.run(["taskset","-c","0",S,"bench","run","--target",f"127.0.0.1:{port}","--command","CLUSTER SLOTS","--clients","10","--requests",str(n)],capture_output=True,text=True)
        b=cpu(p.pid)
        print(f"{masters} masters rep{rep}: proxy CPU {(b-a)/n/1000:.2f} us per CLUSTER SLOTS", flush=True)
    p.kill(); subprocess.run([S,"cluster","down","--dir",d],capture_output=True)
