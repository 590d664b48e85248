#!/usr/bin/env python3
# instructions.py CASES: see README.md.
import subprocess, sys, time, os, glob, shutil, tempfile
from cases import free_port, read_cases
cases=read_cases(sys.argv[1])
N=int(os.environ.get('N','3000'))
for name,f,nk,keys,args in cases:
    port=free_port(); d=tempfile.mkdtemp(prefix='callgrind-')
    srv=subprocess.Popen(['valgrind','--tool=callgrind','--collect-atstart=no','--toggle-collect=processInputBuffer','--toggle-collect=writeToClient',f'--callgrind-out-file={d}/out.%p','redis-server','--port',str(port),'--bind','127.0.0.1','--save','','--appendonly','no'],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    for _ in range(100):
        time.sleep(0.3)
        if subprocess.run(['redis-cli','-p',str(port),'ping'],capture_output=True,text=True).stdout.strip()=='PONG': break
    sha=subprocess.run(['redis-cli','-p',str(port),'-x','SCRIPT','LOAD'],stdin=open(f),capture_output=True,text=True).stdout.strip()
    cmd=['evalsha',sha,nk]+keys+args
    while time.time()%60 > 1 and os.environ.get('ALIGN','1')=='1': time.sleep(0.2)
    t0=time.time()
    subprocess.run(['redis-benchmark','-p',str(port),'-c','1','-r','1000','-n','6000','-q']+cmd,capture_output=True)
    subprocess.run(['callgrind_control','-z',str(srv.pid)],capture_output=True)
    subprocess.run(['redis-benchmark','-p',str(port),'-c','1','-r','1000','-n',str(N),'-q']+cmd,capture_output=True)
    subprocess.run(['callgrind_control','-d',str(srv.pid)],capture_output=True)
    time.sleep(0.5)
    files=sorted(glob.glob(f'{d}/out.*'),key=os.path.getmtime)
    tot=0
    for l in open(files[-1]):
        if l.startswith('summary:') or l.startswith('totals:'):
            tot=int(l.split()[1])
    srv.terminate(); srv.wait()
    print(f"{name:20s} {tot/N:10.0f} instr/call  {time.time()-t0:.1f}s", flush=True)
    shutil.rmtree(d)
