"""What rounds.py and instructions.py share: a free loopback port, and the
case file (lines name|script.lua|numkeys|keys|args; # begins a comment)."""
import socket


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def read_cases(path):
    """The cases of path as (name, script file, numkeys, keys, args), keys and args as lists."""
    out = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        name, script, numkeys, keys, args = line.split('|')
        out.append((name, script, numkeys, keys.split(), args.split()))
    return out
