/* libbcc's kernel symbol walk, short while a compile asks it; see ksyms.h for why. */
#define _GNU_SOURCE
#include "ksyms.h"

#include <bcc/bcc_proc.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

static __thread bool compiling;

void ksyms_compile_begin(void)
{
	compiling = true;
}

void ksyms_compile_end(void)
{
	compiling = false;
}

/* 1 when a tracepoint program may call helper id, 0 when not, -1 when unknown */
static int helper_callable(enum bpf_func_id id)
{
	int r = libbpf_probe_bpf_helper(BPF_PROG_TYPE_TRACEPOINT, id, NULL);

	return r < 0 ? -1 : r > 0;
}

int bcc_procutils_each_ksym(bcc_procutils_ksymcb callback, void *payload)
{
	static int (*libbccs_own)(bcc_procutils_ksymcb, void *);
	/* compiles run one at a time (libbcc cannot compile in two threads at once) */
	static int read_kernel = -2, read_user = -2;

	if (compiling && read_kernel == -2) {
		read_kernel = helper_callable(BPF_FUNC_probe_read_kernel);
		read_user = helper_callable(BPF_FUNC_probe_read_user);
	}
	if (compiling && read_kernel >= 0 && read_user >= 0) {
		/* the addresses only have to be there: libbcc asks whether the names are */
		if (read_kernel)
			callback("bpf_probe_read_kernel", "", 1, payload);
		if (read_user)
			callback("bpf_probe_read_user", "", 2, payload);
		return 0;
	}
	if (!libbccs_own)
		libbccs_own = (int (*)(bcc_procutils_ksymcb, void *))dlsym(RTLD_NEXT, "bcc_procutils_each_ksym");
	return libbccs_own ? libbccs_own(callback, payload) : -1;
}
