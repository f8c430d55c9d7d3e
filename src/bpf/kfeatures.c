/* Kernel BPF features, probed by loading a tiny program; see kfeatures.h. */
#include "kfeatures.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

/* not in the uapi headers of kernels before 6.9 */
#define JCOND 0xe0    /* BPF_JCOND: BPF_JMP class, conditional pseudo jump */
#define MAY_GOTO 0    /* BPF_MAY_GOTO: its src_reg */

bool kfeatures_may_goto(void)
{
	static int known = -1;
	/* r0 = 0; may_goto +0; exit */
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | JCOND, .src_reg = MAY_GOTO, .off = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	if (known < 0) {
		int fd = bpf_prog_load(BPF_PROG_TYPE_TRACEPOINT, "pyebpf_may_goto", "GPL", insns,
				       sizeof(insns) / sizeof(insns[0]), NULL);

		known = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	return known;
}
