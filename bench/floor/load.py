# Load a BPF object with libbpf (bench/floor/floor.bpf.c) and attach every program in it.
#   python3 load.py OBJ           attach, print "recording" on stderr, detach on SIGINT/SIGTERM
#   python3 load.py OBJ --toggle  load only; then each line "1" on stdin attaches every
#                                 program, "0" detaches them; each is answered "ok" on stdout
import ctypes, signal, sys

lib = ctypes.CDLL("libbpf.so.1")
lib.bpf_object__open_file.restype = ctypes.c_void_p
lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
lib.bpf_object__load.argtypes = [ctypes.c_void_p]
lib.bpf_object__next_program.restype = ctypes.c_void_p
lib.bpf_object__next_program.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.bpf_program__attach.restype = ctypes.c_void_p
lib.bpf_program__attach.argtypes = [ctypes.c_void_p]
lib.bpf_link__destroy.argtypes = [ctypes.c_void_p]
lib.libbpf_get_error.argtypes = [ctypes.c_void_p]

obj = lib.bpf_object__open_file(sys.argv[1].encode(), None)
if not obj or lib.libbpf_get_error(obj):
    sys.exit("load.py: cannot open " + sys.argv[1])
if lib.bpf_object__load(obj):
    sys.exit("load.py: cannot load " + sys.argv[1])
progs, p = [], None
while True:
    p = lib.bpf_object__next_program(obj, p)
    if not p:
        break
    progs.append(p)
links = []


def attach():
    for p in progs:
        l = lib.bpf_program__attach(p)
        if not l or lib.libbpf_get_error(l):
            sys.exit("load.py: cannot attach")
        links.append(l)


def detach():
    while links:
        lib.bpf_link__destroy(links.pop())


if "--toggle" in sys.argv[2:]:
    for line in sys.stdin:
        if line.strip() == "1" and not links:
            attach()
        elif line.strip() == "0":
            detach()
        print("ok", flush=True)
    detach()
else:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    attach()
    print("recording with %d programs" % len(links), file=sys.stderr, flush=True)
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    detach()
