#include "pyebpf_bpf.h"

#include <bcc/libbpf.h>
#include <errno.h>
#include <string.h>

#include "jsonfmt.h"
#include "log.h"

int pyebpf_bpf_cflags(struct kbtf *b, struct cflags *cf, const struct common_opts *c)
{
	unsigned upid_size;

	if (kbtf_offset_cflag(b, cf, "OFF_TASK_THREAD_PID", "task_struct", "thread_pid") ||
	    kbtf_offset_cflag(b, cf, "OFF_TASK_GROUP_LEADER", "task_struct", "group_leader") ||
	    kbtf_offset_cflag(b, cf, "OFF_PID_LEVEL", "pid", "level") ||
	    kbtf_offset_cflag(b, cf, "OFF_PID_NUMBERS", "pid", "numbers") ||
	    kbtf_offset_cflag(b, cf, "OFF_UPID_NR", "upid", "nr") ||
	    kbtf_struct_size(b, "upid", &upid_size) ||
	    /* current_fd_file() and file_sock() */
	    kbtf_offset_cflag(b, cf, "OFF_TASK_FILES", "task_struct", "files") ||
	    kbtf_offset_cflag(b, cf, "OFF_FILES_FDT", "files_struct", "fdt") ||
	    kbtf_offset_cflag(b, cf, "OFF_FDTABLE_MAX_FDS", "fdtable", "max_fds") ||
	    kbtf_offset_cflag(b, cf, "OFF_FDTABLE_FD", "fdtable", "fd") ||
	    kbtf_offset_cflag(b, cf, "OFF_FILE_PRIVATE_DATA", "file", "private_data") ||
	    kbtf_offset_cflag(b, cf, "OFF_SOCKET_SK", "socket", "sk"))
		return -1;
	cflags_add(cf, "-DSIZEOF_UPID=%u", upid_size);
	if (c->npids)
		cflags_add(cf, "-DFILTER_PIDS");
	return 0;
}

int pyebpf_bpf_offsets_cflags(struct cflags *cf, const struct common_opts *c,
			      const struct kbtf_offset *offs)
{
	struct kbtf *b = kbtf_open();
	int r;

	if (!b)
		return -1;
	r = pyebpf_bpf_cflags(b, cf, c) || kbtf_offset_cflags(b, cf, offs) ? -1 : 0;
	kbtf_close(b);
	return r;
}

int pyebpf_bpf_children_cflags(struct cflags *cf)
{
	static const struct kbtf_offset offs[] = {
		{ "OFF_TASK_PID", "task_struct", "pid" },
		{ "OFF_TASK_TGID", "task_struct", "tgid" },
		{ NULL, NULL, NULL },
	};
	struct kbtf *b = kbtf_open();
	int r;

	if (!b)
		return -1;
	r = kbtf_offset_cflags(b, cf, offs);
	kbtf_close(b);
	if (!r)
		cflags_add(cf, "-DPYEBPF_FOLLOW_CHILDREN");
	return r;
}

int pyebpf_bpf_attach_children(struct bpfprog *p)
{
	return bpfprog_attach_raw_tracepoint(p, "raw_tracepoint__sched_process_fork", "sched_process_fork") ||
	       bpfprog_attach_tracepoint(p, "sched", "sched_process_exit");
}

int pyebpf_bpf_set_pids(struct bpfprog *p, const struct common_opts *c)
{
	return pyebpf_bpf_set_pid_list(p, c->pids, c->npids);
}

int pyebpf_bpf_set_pid_list(struct bpfprog *p, const pid_t *pids, int n)
{
	int fd = bpfprog_table_fd(p, "pid_filter");
	unsigned char one = 1;

	for (int i = 0; i < n; i++) {
		__u32 pid = (__u32)pids[i];
		if (pid && (fd < 0 || bpf_update_elem(fd, &pid, &one, 0))) {
			log_error("cannot set the pid filter: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

void pyebpf_bpf_set_losses(json_t *o, struct bpfprog *p)
{
	json_set_int(o, "lost", (json_int_t)bpfprog_lost(p));
	json_set_int(o, "missed", (json_int_t)bpfprog_missed(p));
}

void pyebpf_bpf_set_counters(json_t *o, struct bpfprog *p, const struct counter_name *names)
{
	for (; names->name; names++)
		json_set_int(o, names->name, (json_int_t)bpfprog_table_sum_u64(p, "counters", names->id));
}
