/*
 * What every program's records share with C: the task header, and the counters
 * (things that did not go as planned, or were counted rather than sent) whose
 * indexes BPF uses and whose names C prints. __u32/__u64 so it compiles on both sides.
 */
#ifndef PYEBPF_H
#define PYEBPF_H

/* Who and when: filled by task_head_fill() (pyebpf.bpf.h), printed by record_set_task(). */
struct task_head {
	__u64 ts_ns;        /* bpf_ktime_get_ns() */
	__u32 pid, tid;     /* host ids; 0 when unknown */
	__u32 nspid, nstid; /* the ids in the task's own PID namespace; 0 when unreadable */
	char comm[16];
};

/*
 * A program's counters are one X-macro list, X(ID, "name", "meaning"), in its <tool>.h.
 * PYEBPF_COUNTER_ID makes the enum both sides index with; the C side makes the names
 * and the summary fields from the same list (record.h).
 */
#define PYEBPF_COUNTER_ID(id, name, meaning) id,

/* pid_filter's value for a child followed with --children (the -p pids have 1; pyebpf.bpf.h). */
#define PYEBPF_PID_CHILD 2

#endif
