/*
 * A running, unmodified CPython process seen from outside: which module holds the
 * interpreter, which version it is, where its data lives, its threads and their
 * Python names, and what a (code object, instruction) pair means.
 *
 * Everything is read from the target's memory (process_vm_readv, /proc/PID/mem)
 * and from its ELF files through /proc/PID/root, so targets in containers and
 * stripped distro builds (only .dynsym) work. Supported: CPython 3.8 to 3.15
 * (3.13+ through the _Py_DebugOffsets table the target carries). The layout facts
 * this relies on: pyebpf(7), CPYTHON INTERNALS.
 *
 * Not thread-safe: handles are shared (see pyproc_open), so one thread only.
 */
#ifndef PYEBPF_PYPROC_H
#define PYEBPF_PYPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyoffsets.h"

struct pyproc;

/* The supported range, for error messages and checks. */
#define PYPROC_MIN_MINOR 8
#define PYPROC_MAX_MINOR 15
#define PYPROC_RANGE_STR "3.8-3.15"

enum pyproc_errcode {
	PYPROC_OK = 0,
	PYPROC_ENOPROC,      /* no such process, or /proc not readable */
	PYPROC_ENOTPYTHON,   /* no module defining _PyRuntime (and none named like python) */
	PYPROC_EUNSUPPORTED, /* a Python, but a version outside PYPROC_RANGE_STR */
	PYPROC_EREAD,        /* the module is there but its memory/ELF could not be read */
	PYPROC_ECAPS,        /* a capability is missing to read it (msg names it) */
};

struct pyproc_error {
	enum pyproc_errcode code;
	char msg[320]; /* complete sentence without the tool prefix, e.g.
			  "no CPython found in pid 4242 (comm \"nginx\")" */
};

/*
 * Opens pid (a host pid). Finds the module defining _PyRuntime in /proc/PID/maps
 * (executable or libpython3.X.so, also under ld.so or patchelf), its load bias from
 * the program headers, the version and the offsets. NULL on failure with err filled.
 *
 * A process is opened once however many trackers follow it: while a handle of pid is
 * open (and pid is still the process it was opened for), pyproc_open returns that
 * handle, with its maps, symbols, code objects and thread names read already. Every
 * pyproc_open needs its pyproc_close.
 */
struct pyproc *pyproc_open(pid_t pid, struct pyproc_error *err);
void pyproc_close(struct pyproc *p);

pid_t pyproc_pid(const struct pyproc *p);
/* The pid in the target's own (innermost) PID namespace (== pid when not in one). */
pid_t pyproc_ns_pid(const struct pyproc *p);

struct pyversion {
	int major, minor, micro; /* micro -1 when only the file name told the version */
	uint32_t hex;            /* PY_VERSION_HEX, 0 when unknown */
	bool free_threaded;
	const char *source;      /* "Py_Version", "_Py_DebugOffsets" or "file name" */
};
const struct pyversion *pyproc_version(const struct pyproc *p);
/* "CPython 3.11.2 in /usr/bin/python3.11", with source: "CPython 3.11.2 (Py_Version) in ...". */
void pyproc_describe(const struct pyproc *p, bool source, char *buf, size_t len);

/* The ELF module (executable or shared library) that defines _PyRuntime. */
struct pymodule {
	const char *path;      /* as the target sees it (from /proc/PID/maps) */
	const char *host_path; /* openable from here: /proc/PID/root/<path>, <path> (chroot),
				  or /proc/PID/map_files/<range>, whichever is the mapped inode */
	uint64_t bias;         /* runtime address = ELF virtual address + bias */
	bool is_shared_lib;    /* libpython3.X.so (pyenv), not the executable */
	bool has_symtab;       /* full .symtab (static functions like take_gil) */
	bool has_usdt;         /* .note.stapsdt present (Debian builds) */
};
const struct pymodule *pyproc_module(const struct pyproc *p);

/* Runtime address of _PyRuntime. */
uint64_t pyproc_runtime(const struct pyproc *p);
/* Runtime address of a symbol of the module (.dynsym, then .symtab), or 0. */
uint64_t pyproc_symbol(const struct pyproc *p, const char *name);

/*
 * The C library p maps (libc.so.6, or libc-2.X.so): its path as the target sees it,
 * and one openable from here, tried in pyproc's one order (as pymodule.host_path).
 * 0, or -1 when p maps none or its maps cannot be read.
 */
int pyproc_libc(const struct pyproc *p, char *path, size_t pathlen, char *host_path, size_t hostlen);

/*
 * Address of the main interpreter's GIL state (struct _gil_runtime_state: pyebpf(7),
 * CPYTHON INTERNALS, "The GIL"), 0 when it cannot be read: in _PyRuntime up to 3.11,
 * behind the last interpreter's pointer from 3.12.
 */
uint64_t pyproc_gil(const struct pyproc *p);

/* Offsets for this version (tables for 3.8-3.12, the target's _Py_DebugOffsets for 3.13+). */
const struct pyoffsets *pyproc_offsets(const struct pyproc *p);

/* Reads len bytes of target memory at addr; 0, or -1 (errno set) when not all could be read. */
int pyproc_read(const struct pyproc *p, uint64_t addr, void *buf, size_t len);
/* A str object as UTF-8 (repaired), NUL-terminated; 0 or -1. */
int pyproc_read_str(const struct pyproc *p, uint64_t obj, char *buf, size_t len);

#define PYTHREAD_NAME_MAX 128

struct pythread {
	uint64_t tstate;
	uint64_t thread_id; /* pthread_self() of the thread (== its fsbase on x86_64 glibc) */
	pid_t tid;          /* host tid; 0 when it could not be matched */
	pid_t ns_tid;       /* tid in the target's PID namespace; 0 when unknown */
	char name[PYTHREAD_NAME_MAX]; /* threading name, else the OS comm, else "" */
	bool python_name;   /* name came from threading (not comm) */
};

/*
 * The threads of every interpreter (tstate list), newest first. Returns how many were
 * written (at most max), or -1 when the list could not be read.
 */
int pyproc_threads(struct pyproc *p, struct pythread *out, int max);

/*
 * Into buf: the name of host thread tid of p, threading's Thread.name, else
 * "MainThread" for the process's main thread (tid == pid: threading's name for it, so
 * every tool names it alike whether or not threading was imported), else comm (the
 * kernel's, commlen bytes at most, from the event; also when p is NULL). Threads are
 * matched by pthread id (pyproc_threads), which also holds in a forked worker whose
 * threading native ids are still its parent's. An unknown tid rereads the threads at
 * most every 200 ms, one without a Python name yet (threading names a thread in its
 * first moments) every second.
 */
void pyproc_thread_name(struct pyproc *p, pid_t tid, const char *comm, size_t commlen, char *buf,
			size_t len);

/*
 * The thread of p whose PyThreadState is at tstate (ids and name); rereads the threads
 * when tstate is not listed (at most every 20 ms: a new thread is the next waits' GIL
 * holder), or has no Python name yet (every second). NULL when there is none.
 */
const struct pythread *pyproc_thread_of_tstate(struct pyproc *p, uint64_t tstate);

/* What a frame's code object and instruction offset mean. */
struct pycode_loc {
	char func[256];  /* co_qualname (3.11+) or co_name */
	char file[512];  /* co_filename */
	int line;        /* 0 when the line table has none for this instruction */
	int firstlineno; /* co_firstlineno: the def line */
};

/*
 * code: code object address; instr: what the BPF walker recorded for the frame
 * (f_lasti for 3.8-3.10, code-unit index for 3.11+, see bpf_text/pywalk.h); check:
 * the co_firstlineno the walker saw (0 to skip the check). Code objects are cached by
 * address; a cache entry is dropped when the object no longer matches (freed and
 * reused memory). 0, or -1 when the object cannot be read (loc gets "[unknown]").
 */
int pyproc_code_location(struct pyproc *p, uint64_t code, uint32_t instr, uint32_t check,
			 struct pycode_loc *loc);

/* Fills the per-process configuration the BPF walker needs (bpf_text/pywalk.h). */
struct pywalk_config;
void pyproc_walk_config(const struct pyproc *p, struct pywalk_config *cfg);

#endif
