#define _GNU_SOURCE
#include "bpfprog.h"

#include <bcc/bcc_common.h>
#include <bcc/libbpf.h>
#include <bcc/perf_reader.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpfcache.h"
#include "bpfobj.h"
#include "caps.h"
#include "jsonfmt.h"
#include "kheaders.h"
#include "ksyms.h"
#include "log.h"
#include "tracefs.h"

/* from libbpf (linked anyway); its header clashes with libbcc's libbpf.h */
int libbpf_num_possible_cpus(void);

#define MAX_CPUS 1024
#define MAX_PROGS 32
/* compiles at once (bpfprog_compile_many): each LLVM takes some 100 MiB */
#define MAX_COMPILERS 4
/* threads that end attachments together (bpfprog_detach_all) */
#define DETACH_THREADS 32

struct loaded_prog {
	char *name;
	int fd;
};

struct perf_buffer {
	bpfprog_event_cb cb;
	void *ctx;
	uint64_t *aligned; /* records sit 4-byte aligned in the ring: copied here first */
	size_t aligned_size;
	struct perf_reader *readers[MAX_CPUS];
	int nreaders;
	uint64_t lost;
};

struct bpfprog {
	struct bpfobj obj;
	struct loaded_prog progs[MAX_PROGS];
	int nprogs;
	struct link {
		int fd;   /* perf event or raw tracepoint fd */
		int wave; /* ended after every attachment of a lower wave (bpfprog_detach_later) */
	} *links;
	int nlinks, caplinks, wave;
	struct perf_buffer *bufs[8];
	int nbufs;
	struct ring_buffer *ring; /* libbpf's, through libbcc */
	bpfprog_event_cb ring_cb;
	void *ring_ctx;
};

void bpfprog_print_text(FILE *f, const char *text, const struct cflags *cf)
{
	for (int i = 0; cf && i < cf->n; i++)
		fprintf(f, "// cflag: %s\n", cf->v[i]);
	fputs(text, f);
}

int cpus_online(int *cpus, int max)
{
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");
	int n = 0, a, b;
	char sep;

	if (!f)
		return 0;
	while (n < max && fscanf(f, "%d", &a) == 1) {
		b = a;
		if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
			if (fscanf(f, "%d", &b) != 1)
				break;
			if (fscanf(f, "%c", &sep) != 1)
				sep = 0;
		}
		for (int c = a; c <= b && n < max; c++)
			cpus[n++] = c;
		if (sep != ',')
			break;
	}
	fclose(f);
	return n;
}

/*
 * Whether text has a tracepoint program (TRACEPOINT_PROBE(c, e), or a function
 * tracepoint__c__e): libbcc builds its args from the tracefs format file while it
 * compiles. Raw tracepoints, perf events and uprobes need no tracefs, so a tool
 * without tracepoints (pystack, pygc) runs where tracefs is closed to it.
 */
/* Whether cf has -DNAME or -DNAME=... (name: len bytes). */
static bool cflags_defines(const struct cflags *cf, const char *name, size_t len)
{
	for (int i = 0; cf && i < cf->n; i++)
		if (!strncmp(cf->v[i], "-D", 2) && !strncmp(cf->v[i] + 2, name, len) &&
		    (cf->v[i][2 + len] == '\0' || cf->v[i][2 + len] == '='))
			return true;
	return false;
}

/*
 * Whether the text compiled with cf has a tracepoint program: a line with a mark that
 * is not inside an #ifdef NAME (#ifndef NAME) whose NAME cf leaves undefined (defines).
 * Other #if lines are taken as true: at worst tracefs is asked for and not used.
 */
static bool uses_tracepoints(const char *text, const struct cflags *cf)
{
	static const char *const marks[][2] = { { "TRACEPOINT_PROBE(", "RAW_" }, { "tracepoint__", "raw_" } };
	bool off[32] = { false }, from_ifdef[32] = { false };
	int depth = 0, skipped = 0;

	for (const char *l = text; *l;) {
		const char *end = strchr(l, '\n'), *s = l;
		size_t len = end ? (size_t)(end - l) : strlen(l);

		while (s < l + len && (*s == ' ' || *s == '\t'))
			s++;
		if (*s == '#') {
			bool ifdef = !strncmp(s, "#ifdef ", 7), ifndef = !strncmp(s, "#ifndef ", 8);

			if ((ifdef || ifndef || !strncmp(s, "#if", 3)) && depth < 32) {
				const char *name = s + (ifdef ? 7 : 8);
				size_t n = strcspn(name, " \t\n/");

				off[depth] = (ifdef || ifndef) && (cflags_defines(cf, name, n) == ifndef);
				from_ifdef[depth] = ifdef || ifndef;
				skipped += off[depth++];
			} else if (!strncmp(s, "#else", 5) && depth > 0 && from_ifdef[depth - 1]) {
				skipped += off[depth - 1] ? -1 : 1;
				off[depth - 1] = !off[depth - 1];
			} else if (!strncmp(s, "#endif", 6) && depth > 0) {
				skipped -= off[--depth];
			}
		} else if (!skipped) {
			for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
				const char *m = l;
				size_t ml = strlen(marks[i][0]);

				while ((m = memmem(m, len - (size_t)(m - l), marks[i][0], ml))) {
					if (m - l < 4 || strncmp(m - 4, marks[i][1], 4))
						return true;
					m++;
				}
			}
		}
		l += len + (end != NULL);
	}
	return false;
}

/* Which kernel headers the compiles use, said once per process (and not by its children). */
static bool said_headers;

static void say_headers(const struct kheaders *kh)
{
	if (!said_headers)
		log_info("kernel headers: %s (%s)", kh->what, kh->why);
	said_headers = true;
}

/* Compiles text in this process against kh into o (the libbcc module is gone afterwards): 0, or -1 after saying why. */
static int compile_here(const char *text, const struct cflags *cf, const struct kheaders *kh, struct bpfobj *o)
{
	char *users_source;
	int saved_stdout, r;
	void *mod;
	uint64_t t0 = time_mono_ns();

	memset(o, 0, sizeof(*o));
	/* the user's own value comes back afterwards: the next compile must find it, not our temp dir */
	users_source = getenv("BCC_KERNEL_SOURCE");
	users_source = users_source ? strdup(users_source) : NULL;
	setenv("BCC_KERNEL_SOURCE", kh->dir, 1);

	/* libbcc prints some diagnostics on stdout, which carries results only */
	fflush(stdout);
	saved_stdout = dup(STDOUT_FILENO);
	dup2(STDERR_FILENO, STDOUT_FILENO);
	ksyms_compile_begin();
	mod = bpf_module_create_c_from_string(text, 0, (const char **)(cf ? cf->v : NULL), cf ? cf->n : 0, true,
					      NULL);
	ksyms_compile_end();
	fflush(stdout);
	if (saved_stdout >= 0) {
		dup2(saved_stdout, STDOUT_FILENO);
		close(saved_stdout);
	}
	if (users_source)
		setenv("BCC_KERNEL_SOURCE", users_source, 1);
	else
		unsetenv("BCC_KERNEL_SOURCE");
	free(users_source);
	if (!mod) {
		log_error("BPF compile failed (see the messages above; --ebpf prints the text)");
		return -1;
	}
	r = bpfobj_from_module(mod, o);
	if (r)
		log_error("cannot keep the compiled BPF program: %s", strerror(errno ? errno : ENOMEM));
	/* the module's maps stay open in o; LLVM's memory goes back to the system */
	bpf_module_destroy(mod);
	malloc_trim(0);
	log_debug("a BPF program of %d functions and %d maps compiled in %.0f ms (process %d)", o->nfuncs,
		  o->ntables, (time_mono_ns() - t0) / 1e6, (int)getpid());
	return r;
}

/* The program under key (NULL: none) from the compile cache into o: 0, or -1. */
static int from_cache(const char *key, size_t len, struct bpfobj *o)
{
	uint64_t t0 = time_mono_ns();

	if (!key || bpfcache_get(key, len, o))
		return -1;
	log_debug("a BPF program of %d functions and %d maps from the compile cache in %.1f ms", o->nfuncs,
		  o->ntables, (time_mono_ns() - t0) / 1e6);
	return 0;
}

/* What every compile needs first: tracefs (for texts that use tracepoints), and the headers, said once. */
static int prepare(const char *const *texts, const struct cflags *const *cfs, int n, const char *kernel_headers,
		   struct kheaders *kh)
{
	for (int i = 0; i < n; i++)
		if (uses_tracepoints(texts[i], cfs[i]) && tracefs_ensure())
			return -1;
	if (kheaders_find(kernel_headers, kh)) {
		log_error("cannot write built-in kernel headers: %s", strerror(errno));
		return -1;
	}
	say_headers(kh);
	return 0;
}

/* text's program from the compile cache, else compiled here and stored there: NULL after saying why. */
static struct bpfprog *compile_one(const char *text, const struct cflags *cf, const struct kheaders *kh)
{
	struct bpfprog *p = calloc(1, sizeof(*p));
	size_t len = 0;
	char *key = bpfcache_key(text, cf, kh, &len);

	if (p && from_cache(key, len, &p->obj)) {
		if (compile_here(text, cf, kh, &p->obj)) {
			free(p);
			p = NULL;
		} else if (key) {
			bpfcache_put(key, len, &p->obj);
		}
	}
	free(key);
	return p;
}

struct bpfprog *bpfprog_compile(const char *text, const struct cflags *cf, const char *kernel_headers)
{
	struct kheaders kh;
	struct bpfprog *p;

	if (prepare(&text, &cf, 1, kernel_headers, &kh))
		return NULL;
	p = compile_one(text, cf, &kh);
	kheaders_release(&kh);
	return p;
}

/* A child compiling text i of bpfprog_compile_many, and the socket it answers on. */
struct compiler {
	pid_t pid;
	int sock;
};

static void start_compiler(struct compiler *c, const char *text, const struct cflags *cf, const struct kheaders *kh)
{
	int sv[2];

	c->pid = -1;
	c->sock = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return;
	fflush(NULL); /* nothing buffered here is written twice */
	c->pid = fork();
	if (c->pid == 0) {
		struct bpfobj o;
		close(sv[0]);
		_exit(compile_here(text, cf, kh, &o) || bpfobj_send(sv[1], &o) ? 1 : 0);
	}
	close(sv[1]);
	if (c->pid < 0) {
		close(sv[0]);
		return;
	}
	c->sock = sv[0];
}

/* What child c sent: the program, or NULL (it failed, and said why). */
static struct bpfprog *finish_compiler(struct compiler *c)
{
	struct bpfprog *p = calloc(1, sizeof(*p));
	int status = 0;

	if (p && bpfobj_recv(c->sock, &p->obj)) {
		free(p);
		p = NULL;
	}
	close(c->sock);
	while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!p && !(WIFEXITED(status) && WEXITSTATUS(status) == 1))
		log_error("the BPF compile's process ended without a program (status 0x%x)", status);
	return p;
}

void bpfprog_compile_many(const char *const *texts, const struct cflags *const *cfs, int n,
			  const char *kernel_headers, struct bpfprog **out)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int width = cpus > 1 && n > 1 ? (int)(cpus < MAX_COMPILERS ? cpus : MAX_COMPILERS) : 1;
	struct compiler c[MAX_COMPILERS];
	int of[MAX_COMPILERS]; /* the text child k compiles, -1: none */
	int next = 0, running = 0;
	struct kheaders kh;
	char **keys = calloc((size_t)(n > 0 ? n : 1), sizeof(*keys));
	size_t *lens = calloc((size_t)(n > 0 ? n : 1), sizeof(*lens));

	for (int i = 0; i < n; i++)
		out[i] = NULL;
	if (!keys || !lens || prepare(texts, cfs, n, kernel_headers, &kh)) {
		free(keys);
		free(lens);
		return;
	}
	/* what the cache has is not compiled again */
	for (int i = 0; i < n; i++) {
		keys[i] = bpfcache_key(texts[i], cfs[i], &kh, &lens[i]);
		if (!(out[i] = calloc(1, sizeof(*out[i]))) || from_cache(keys[i], lens[i], &out[i]->obj)) {
			free(out[i]);
			out[i] = NULL;
		}
	}
	/* the rest in width children at a time; whichever answers first makes room for the next text */
	for (int k = 0; k < width; k++)
		of[k] = -1;
	while (width > 1) {
		struct pollfd fds[MAX_COMPILERS];
		for (int k = 0; k < width; k++) {
			while (next < n && out[next])
				next++;
			if (of[k] >= 0 || next == n)
				continue;
			start_compiler(&c[k], texts[next], cfs[next], &kh);
			if (c[k].pid < 0) { /* no child: here */
				out[next] = compile_one(texts[next], cfs[next], &kh);
				next++;
				k--;
				continue;
			}
			of[k] = next++;
			running++;
		}
		if (!running)
			break;
		for (int k = 0; k < width; k++)
			fds[k] = (struct pollfd){ .fd = of[k] >= 0 ? c[k].sock : -1, .events = POLLIN };
		if (poll(fds, (nfds_t)width, -1) < 0 && errno != EINTR)
			break; /* cannot happen with valid fds; the children are collected below */
		for (int k = 0; k < width; k++)
			if (of[k] >= 0 && fds[k].revents) {
				int i = of[k];
				if ((out[i] = finish_compiler(&c[k])) && keys[i])
					bpfcache_put(keys[i], lens[i], &out[i]->obj);
				of[k] = -1;
				running--;
			}
	}
	for (int k = 0; k < width; k++)
		if (of[k] >= 0)
			out[of[k]] = finish_compiler(&c[k]);
	/* one CPU: here, one after another */
	for (int i = 0; i < n; i++)
		if (!out[i] && i >= next)
			out[i] = compile_one(texts[i], cfs[i], &kh);
	kheaders_release(&kh);
	for (int i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	free(lens);
}

int bpfprog_prog_fd(struct bpfprog *p, const char *fn, int prog_type)
{
	const struct bpfobj_func *f;
	struct bpf_prog_info info;
	uint32_t info_len = sizeof(info);
	uint64_t t0;
	int fd;

	for (int i = 0; i < p->nprogs; i++)
		if (!strcmp(p->progs[i].name, fn))
			return p->progs[i].fd;
	if (p->nprogs == MAX_PROGS)
		return -1;
	f = bpfobj_func(&p->obj, fn);
	if (!f) {
		log_error("BPF function %s not found in the program", fn);
		return -1;
	}
	t0 = time_mono_ns();
	fd = bcc_prog_load(prog_type, fn, f->insns, (int)f->size, p->obj.license, p->obj.kern_version, 0, NULL, 0);
	if (fd < 0) {
		log_error("loading BPF function %s failed: %s", fn, strerror(-fd));
		return -1;
	}
	/* what the verifier did, for -v: the load is mostly its time (pyebpf(7), The verifier) */
	memset(&info, 0, sizeof(info));
	if (!bpf_obj_get_info(fd, &info, &info_len))
		log_debug("%s: loaded in %.1f ms, %zu instructions, %u verified", fn,
			  (time_mono_ns() - t0) / 1e6, f->size / sizeof(struct bpf_insn),
			  info.verified_insns);
	p->progs[p->nprogs++] = (struct loaded_prog){ strdup(fn), fd };
	return fd;
}

static int add_link(struct bpfprog *p, int fd)
{
	if (p->nlinks == p->caplinks) {
		int cap = p->caplinks ? 2 * p->caplinks : 16;
		struct link *v = realloc(p->links, (size_t)cap * sizeof(*v));
		if (!v) {
			close(fd);
			return -1;
		}
		p->links = v, p->caplinks = cap;
	}
	p->links[p->nlinks++] = (struct link){ fd, p->wave };
	return 0;
}

int bpfprog_attach_tracepoint(struct bpfprog *p, const char *category, const char *name)
{
	char fn[256];
	int prog, fd;

	snprintf(fn, sizeof(fn), "tracepoint__%s__%s", category, name);
	prog = bpfprog_prog_fd(p, fn, BPF_PROG_TYPE_TRACEPOINT);
	if (prog < 0)
		return -1;
	fd = bpf_attach_tracepoint(prog, category, name);
	if (fd < 0) {
		log_error("attaching to tracepoint %s:%s failed: %s", category, name,
			  strerror(errno));
		return -1;
	}
	log_debug("attached tracepoint %s:%s", category, name);
	return add_link(p, fd);
}

int bpfprog_attach_raw_tracepoint(struct bpfprog *p, const char *fn, const char *tp)
{
	int prog = bpfprog_prog_fd(p, fn, BPF_PROG_TYPE_RAW_TRACEPOINT), fd;

	if (prog < 0)
		return -1;
	fd = bpf_attach_raw_tracepoint(prog, tp);
	if (fd < 0) {
		log_error("attaching to raw tracepoint %s failed: %s", tp, strerror(errno));
		return -1;
	}
	return add_link(p, fd);
}

int bpfprog_check_uprobe_caps(void)
{
	/*
	 * The kernel's uprobe PMU takes CAP_SYS_ADMIN (CAP_PERFMON is not enough). Without
	 * it libbcc falls back to writing tracefs's uprobe_events, which with
	 * CAP_DAC_OVERRIDE "attaches" probes that never fire: say what is missing instead.
	 */
	static bool said;

	if (caps_have(CAP_SYS_ADMIN))
		return 0;
	if (!said)
		caps_error("needs CAP_SYS_ADMIN to attach uprobes and USDT probes (the kernel's uprobe "
			   "perf events are root-only; CAP_BPF and CAP_PERFMON are not enough)");
	said = true;
	return -1;
}

int bpfprog_attach_uprobe(struct bpfprog *p, const char *fn, const char *binary, uint64_t offset,
			  pid_t pid, bool retprobe, uint32_t ref_ctr_offset)
{
	/*
	 * The event's name is the process's, numbered across all its programs: with a
	 * number per program, two trackers in one process (pymonitor) made two events of
	 * one name, and one of them stayed in uprobe_events after the exit.
	 */
	static unsigned probe_seq;
	int prog = bpfprog_prog_fd(p, fn, BPF_PROG_TYPE_KPROBE), fd;
	char ev[64];

	if (bpfprog_check_uprobe_caps() || prog < 0)
		return -1;
	snprintf(ev, sizeof(ev), "pyebpf_%d_%u", getpid(), probe_seq++);
	fd = bpf_attach_uprobe(prog, retprobe ? BPF_PROBE_RETURN : BPF_PROBE_ENTRY, ev, binary,
			       offset, pid, ref_ctr_offset);
	if (fd < 0) {
		log_error("attaching %s to %s+0x%llx failed: %s", retprobe ? "uretprobe" : "uprobe",
			  binary, (unsigned long long)offset, strerror(errno));
		return -1;
	}
	log_debug("attached %s %s at %s+0x%llx (pid %d)", retprobe ? "uretprobe" : "uprobe", fn,
		  binary, (unsigned long long)offset, pid);
	return add_link(p, fd);
}

int bpfprog_attach_perf_event(struct bpfprog *p, const char *fn, uint32_t type, uint64_t config,
			      uint64_t freq, pid_t pid)
{
	int prog = bpfprog_prog_fd(p, fn, BPF_PROG_TYPE_PERF_EVENT), cpus[MAX_CPUS];
	int n = cpus_online(cpus, MAX_CPUS);

	if (prog < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		int fd = bpf_attach_perf_event(prog, type, config, 0, freq, pid, cpus[i], -1);
		if (fd < 0) {
			log_error("attaching a perf event on CPU %d failed: %s", cpus[i],
				  strerror(errno));
			return -1;
		}
		if (add_link(p, fd))
			return -1;
	}
	return 0;
}

int bpfprog_attach_cpu_clock(struct bpfprog *p, const char *fn, uint64_t period_ns, int *fds, int max)
{
	int prog = bpfprog_prog_fd(p, fn, BPF_PROG_TYPE_PERF_EVENT), cpus[MAX_CPUS];
	int n = cpus_online(cpus, MAX_CPUS);

	if (prog < 0)
		return -1;
	if (n > max)
		n = max;
	for (int i = 0; i < n; i++) {
		fds[i] = bpf_attach_perf_event(prog, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, period_ns, 0,
					       -1, cpus[i], -1);
		if (fds[i] < 0) {
			log_error("attaching a cpu-clock event on CPU %d failed: %s", cpus[i], strerror(errno));
			return -1;
		}
		if (add_link(p, fds[i]))
			return -1;
	}
	return n;
}

int bpfprog_attachments(const struct bpfprog *p)
{
	return p->nlinks;
}

int bpfprog_table_fd(struct bpfprog *p, const char *name)
{
	const struct bpfobj_table *t = bpfobj_table(&p->obj, name);

	return t ? t->fd : -1;
}

uint64_t bpfprog_table_sum_u64(struct bpfprog *p, const char *name, uint32_t key)
{
	const struct bpfobj_table *t = bpfobj_table(&p->obj, name);
	uint64_t vals[MAX_CPUS] = { 0 }, sum = 0;
	int n;

	if (!t || t->leaf_size != sizeof(uint64_t))
		return 0;
	if (bpf_lookup_elem(t->fd, &key, vals))
		return 0;
	n = t->type == BPF_MAP_TYPE_PERCPU_ARRAY ? libbpf_num_possible_cpus() : 1;
	for (int i = 0; i < n && i < MAX_CPUS; i++)
		sum += vals[i];
	return sum;
}

/* libbcc hands both callbacks one cookie: the buffer, which knows the tool's callback */
static void on_raw(void *cookie, void *data, int size)
{
	struct perf_buffer *b = cookie;

	if (size <= 0)
		return;
	if ((size_t)size > b->aligned_size) {
		uint64_t *bigger = realloc(b->aligned, (size_t)size + 8);
		if (!bigger)
			return;
		b->aligned = bigger, b->aligned_size = (size_t)size;
	}
	memcpy(b->aligned, data, (size_t)size);
	b->cb(b->ctx, b->aligned, size);
}

static void on_lost(void *ctx, uint64_t lost)
{
	((struct perf_buffer *)ctx)->lost += lost;
}

/* /proc/self/status's VmPin: what perf buffers locked beyond the user's free allowance, KiB. */
static unsigned long pinned_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long kib = 0;
	char line[128];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %lu", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/*
 * Whether a perf buffer of pages (per CPU) was refused for the memlock limit, and so
 * said: without CAP_IPC_LOCK the kernel lets a user lock perf_event_mlock_kb per CPU,
 * then RLIMIT_MEMLOCK per process, beyond which mmap fails with EPERM (libbcc prints
 * "mmap: Operation not permitted" and leaves errno to later calls).
 */
static bool memlock_denied(int pages)
{
	unsigned long want = (unsigned long)(pages + 1) * ((unsigned long)sysconf(_SC_PAGESIZE) / 1024);
	struct rlimit rl;

	if (caps_have(CAP_IPC_LOCK) || getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    pinned_kib() + want <= rl.rlim_cur / 1024)
		return false;
	caps_error("needs CAP_IPC_LOCK to lock its perf buffers (%lu KiB per CPU) beyond the memlock "
		   "limit (%lu KiB, %lu locked already), or a higher limit (systemd: LimitMEMLOCK=)",
		   want, (unsigned long)(rl.rlim_cur / 1024), pinned_kib());
	return true;
}

int bpfprog_open_perf_buffer(struct bpfprog *p, const char *table, bpfprog_event_cb cb, void *ctx,
			     int pages, int wakeup_events)
{
	int map = bpfprog_table_fd(p, table), cpus[MAX_CPUS], n = cpus_online(cpus, MAX_CPUS);
	struct perf_buffer *b;

	if (map < 0 || p->nbufs == (int)(sizeof(p->bufs) / sizeof(p->bufs[0]))) {
		log_error("no perf output table %s in the BPF program", table);
		return -1;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return -1;
	b->cb = cb, b->ctx = ctx;
	p->bufs[p->nbufs++] = b;
	for (int i = 0; i < n; i++) {
		struct bcc_perf_buffer_opts opts = { .pid = -1, .cpu = cpus[i],
						     .wakeup_events = wakeup_events };
		struct perf_reader *r = bpf_open_perf_buffer_opts(on_raw, on_lost, b, pages, &opts);
		int fd;

		if (!r) {
			if (!memlock_denied(pages))
				log_error("opening the perf buffer on CPU %d failed: %s", cpus[i],
					  strerror(errno));
			return -1;
		}
		b->readers[b->nreaders++] = r;
		fd = perf_reader_fd(r);
		if (bpf_update_elem(map, &cpus[i], &fd, 0)) {
			log_error("registering the perf buffer of CPU %d failed: %s", cpus[i],
				  strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Ring records are 8-byte aligned already: handed over as they are. */
static int on_ring(void *ctx, void *data, size_t size)
{
	struct bpfprog *p = ctx;

	p->ring_cb(p->ring_ctx, data, (int)size);
	return 0;
}

int bpfprog_open_ring_buffer(struct bpfprog *p, const char *table, bpfprog_event_cb cb, void *ctx)
{
	int map = bpfprog_table_fd(p, table);

	if (map < 0) {
		log_error("no ring buffer table %s in the BPF program", table);
		return -1;
	}
	if (p->ring) {
		log_error("a second ring buffer (%s): one per program", table);
		return -1;
	}
	p->ring_cb = cb, p->ring_ctx = ctx;
	p->ring = bpf_new_ringbuf(map, on_ring, p);
	if (!p->ring) {
		log_error("opening the ring buffer %s failed: %s", table, strerror(errno));
		return -1;
	}
	return 0;
}

/* Everything buffered, to the callbacks: 0, or -1 when the ring is corrupt. */
static int deliver(struct bpfprog *p)
{
	for (int i = 0; i < p->nbufs; i++)
		for (int j = 0; j < p->bufs[i]->nreaders; j++)
			perf_reader_event_read(p->bufs[i]->readers[j]);
	return p->ring && bpf_consume_ringbuf(p->ring) < 0 ? -1 : 0;
}

int bpfprog_pollfds(struct bpfprog *p, struct pollfd *fds, int max)
{
	int n = 0;

	/* a ring buffer is never signalled (emit_event writes it without wakeups) */
	for (int i = 0; p && i < p->nbufs; i++)
		for (int j = 0; j < p->bufs[i]->nreaders && n < max; j++, n++)
			fds[n] = (struct pollfd){ .fd = perf_reader_fd(p->bufs[i]->readers[j]), .events = POLLIN };
	return n;
}

int bpfprog_deliver(struct bpfprog *p)
{
	return p ? deliver(p) : 0;
}

uint64_t bpfprog_lost(struct bpfprog *p)
{
	uint64_t from_buffers = 0, counted = bpfprog_table_sum_u64(p, "events_lost", 0);

	for (int i = 0; i < p->nbufs; i++)
		from_buffers += p->bufs[i]->lost;
	return counted > from_buffers ? counted : from_buffers;
}

uint64_t bpfprog_missed(struct bpfprog *p)
{
	unsigned long long total = 0, v, recovered;
	char path[64], line[128];
	size_t len;

	for (int i = 0; p && i < p->nprogs; i++) {
		FILE *f;

		/* a backup's skipped runs are hits its primary saw */
		len = strlen(p->progs[i].name);
		if (len > 8 && !strcmp(p->progs[i].name + len - 8, "__backup"))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", p->progs[i].fd);
		if (!(f = fopen(path, "re")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "recursion_misses: %llu", &v) == 1)
				total += v;
		fclose(f);
	}
	recovered = p && bpfprog_table_fd(p, "backup_recovered") >= 0 ? bpfprog_table_sum_u64(p, "backup_recovered", 0) : 0;
	return total > recovered ? total - recovered : 0;
}

void bpfprog_detach_later(struct bpfprog *p)
{
	p->wave++;
}

struct closer {
	int *fds;
	int n;
	atomic_int next;
};

static void *close_some(void *arg)
{
	struct closer *c = arg;
	int i;

	while ((i = atomic_fetch_add(&c->next, 1)) < c->n)
		close(c->fds[i]);
	return NULL;
}

/*
 * The last close of a tracepoint's or uprobe's perf event waits for RCU grace periods
 * (tens of milliseconds each on a busy machine): one after the other, nine trackers'
 * attachments took seconds to end. Closed from many threads at once, the waits overlap.
 */
static void close_together(int *fds, int n)
{
	pthread_t threads[DETACH_THREADS];
	struct closer c = { .fds = fds, .n = n };
	int nthreads = 0;

	while (nthreads < DETACH_THREADS && nthreads < n - 1 &&
	       !pthread_create(&threads[nthreads], NULL, close_some, &c))
		nthreads++;
	close_some(&c); /* also all of them when no thread could start */
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
}

void bpfprog_detach_all(struct bpfprog *const *ps, int n)
{
	int total = 0, *fds;

	for (int i = 0; i < n; i++)
		total += ps[i] ? ps[i]->nlinks : 0;
	if (!(fds = malloc(((size_t)total + 1) * sizeof(*fds)))) {
		/* one at a time, in order, needs no memory */
		for (int i = 0; i < n; i++)
			for (int j = 0; ps[i] && j < ps[i]->nlinks; j++)
				close(ps[i]->links[j].fd);
	} else {
		/* wave by wave: all of a wave at once */
		for (int wave = 0, left = total; left > 0; wave++) {
			int k = 0;
			for (int i = 0; i < n; i++)
				for (int j = 0; ps[i] && j < ps[i]->nlinks; j++)
					if (ps[i]->links[j].wave == wave)
						fds[k++] = ps[i]->links[j].fd;
			close_together(fds, k);
			left -= k;
		}
		free(fds);
	}
	for (int i = 0; i < n; i++)
		if (ps[i])
			ps[i]->nlinks = 0;
}

void bpfprog_detach(struct bpfprog *p)
{
	bpfprog_detach_all(&p, 1);
}

void bpfprog_close(struct bpfprog *p)
{
	if (!p)
		return;
	bpfprog_detach(p);
	free(p->links);
	if (p->ring)
		bpf_free_ringbuf(p->ring);
	for (int i = 0; i < p->nbufs; i++) {
		for (int j = 0; j < p->bufs[i]->nreaders; j++)
			perf_reader_free(p->bufs[i]->readers[j]);
		free(p->bufs[i]->aligned);
		free(p->bufs[i]);
	}
	for (int i = 0; i < p->nprogs; i++) {
		close(p->progs[i].fd);
		free(p->progs[i].name);
	}
	bpfobj_free(&p->obj);
	free(p);
}

const struct bpfprog_runtime bpfprog_runtime = {
	.compile = bpfprog_compile,
	.compile_many = bpfprog_compile_many,
	.print_text = bpfprog_print_text,
	.pollfds = bpfprog_pollfds,
	.deliver = bpfprog_deliver,
	.detach_all = bpfprog_detach_all,
	.close = bpfprog_close,
};
