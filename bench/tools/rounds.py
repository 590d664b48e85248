#!/usr/bin/env python3
# rounds.py CASES [ROUNDS] [CALLS]: see README.md.
import subprocess, sys, time, statistics
from cases import free_port, read_cases
port=free_port()
srv=subprocess.Popen(['redis-server','--port',str(port),'--bind','127.0.0.1','--save','','--appendonly','no'],stdout=subprocess.DEVNULL)
time.sleep(0.5)
def cli(*a):
    return subprocess.run(['redis-cli','-p',str(port)]+list(a),capture_output=True,text=True).stdout
cases=[]
for name,f,nk,keys,args in read_cases(sys.argv[1]):
    sha=subprocess.run(['redis-cli','-p',str(port),'-x','SCRIPT','LOAD'],stdin=open(f),capture_output=True,text=True).stdout.strip()
    cases.append((name,['evalsha',sha,nk]+keys+args))
rounds=int(sys.argv[2]) if len(sys.argv)>2 else 5
n=sys.argv[3] if len(sys.argv)>3 else '100000'
def bench(cmd,n):
    subprocess.run(['redis-benchmark','-p',str(port),'-c','16','-r','10000','-n',n,'-q']+cmd,capture_output=True)
res={c[0]:[] for c in cases}; cmds={c[0]:[] for c in cases}
for name,cmd in cases:
    out=subprocess.run(['redis-cli','-p',str(port)]+cmd,capture_output=True,text=True).stdout
    print(name, out.replace('\n',' ')[:200])
    bench(cmd,'10000')
for r in range(rounds):
    order=cases[r%len(cases):]+cases[:r%len(cases)]
    for name,cmd in order:
        cli('CONFIG','RESETSTAT')
        bench(cmd,n)
        info=cli('INFO','commandstats')
        tot=0;ev=None
        for l in info.splitlines():
            if l.startswith('cmdstat_'):
                k,v=l.split(':',1); d=dict(x.split('=') for x in v.split(','))
                if k in('cmdstat_config','cmdstat_info'): continue
                tot+=int(d['calls'])
                if k=='cmdstat_evalsha': ev=d
        res[name].append(float(ev['usec_per_call'])); cmds[name].append(tot/int(ev['calls']))
base=None
for name,_ in cases:
    m=statistics.median(res[name])
    if base is None: base=m
    print(f"{name:20s} {m:6.2f} ({min(res[name]):.2f}..{max(res[name]):.2f}) cmds {statistics.median(cmds[name]):.2f}  x{m/base:.2f}")
srv.terminate()
