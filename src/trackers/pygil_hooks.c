/* pygil's hooks: which one goes on an interpreter binary (pygil_hooks.h). */
#include "pygil_hooks.h"

#include <stdio.h>

#include "elfsyms.h"

static int plan_take_gil(struct pyhook_plan *plan, const struct pyhook_target *t, pid_t pid,
			 char *how, size_t howlen)
{
	int n = pyhooks_add_function(plan, t->binary, pid, "take_gil", "take_entry", "take_return");

	if (n > 0)
		snprintf(how, howlen, "uprobes on take_gil%s", n > 1 ? " and its clones" : "");
	return n < 0 ? -1 : n == 0;
}

static int plan_condvar(struct pyhook_plan *plan, const struct pyhook_target *t, pid_t pid,
			char *how, size_t howlen)
{
	char path[4096] = "", host_path[4200] = "";
	bool found = !pyproc_libc(t->py, path, sizeof(path), host_path, sizeof(host_path));
	const char *libc = pid > 0 ? host_path : pyhooks_every_process_path(path, host_path);
	uint64_t off;

	if (!found || elfsyms_default_func_offset(libc, "pthread_cond_timedwait", &off)) {
		snprintf(how, howlen, "its libc's pthread_cond_timedwait was not found (--hook condvar)");
		return 1;
	}
	if (pyhooks_add_uprobe_at(plan, libc, pid, "pthread_cond_timedwait", off, "cond_entry", false) ||
	    pyhooks_add_uprobe_at(plan, libc, pid, "pthread_cond_timedwait", off, "cond_return", true))
		return -1;
	snprintf(how, howlen, "uprobes on libc's pthread_cond_timedwait (default version, "
		 "offset 0x%llx) on the GIL's condition variable", (unsigned long long)off);
	return 0;
}

/*
 * The hook for one interpreter binary. The futex tracepoints need no symbol and trap
 * nowhere: the uprobes of the other two are a trap into the kernel at each hit, and
 * condvar's run with gil->mutex held, which every GIL handoff needs (make bench: a
 * socket ping-pong kept 0.6 of its throughput with take_gil, 0.1 to 0.3 with condvar).
 */
int pygil_hooks_plan(enum pygil_hook hook, bool children, struct pyhook_plan *plan,
		     const struct pyhook_target *t, char *how, size_t howlen)
{
	/* --children: on the file for every process (the children's too), filtered in BPF */
	pid_t pid = children ? -1 : t->pid;
	int r;

	if (!t->py)
		return 1;
	if (pyproc_version(t->py)->free_threaded) {
		snprintf(how, howlen, "is a free-threaded build: this interpreter has no GIL");
		return 1;
	}
	switch (hook) {
	case PYGIL_HOOK_FUTEX:
		snprintf(how, howlen, "its waits for the GIL's condition variable, from the futex syscall "
			 "tracepoints");
		return 0;
	case PYGIL_HOOK_TAKE_GIL:
		if ((r = plan_take_gil(plan, t, pid, how, howlen)) == 1)
			snprintf(how, howlen, "has no take_gil symbol (--hook take_gil)");
		return r;
	case PYGIL_HOOK_CONDVAR:
		break;
	}
	return plan_condvar(plan, t, pid, how, howlen);
}
