/*
 * ELF files of targets (src/python/elfsyms.c; src/bpf/symbols.c's file offsets and
 * src/bpf/usdt.c's notes and argument specs, both through libbcc): symbols, program
 * headers, sections, symbol versions and .note.stapsdt, as a hostile or broken
 * binary in a container could hold them. The input is the file.
 */
#include "fuzz.h"

#include "elfsyms.h"
#include "symbols.h"
#include "usdt.h"

static void usdt(const char *path, const char *provider, const char *probe)
{
	struct usdt *u = usdt_new();
	char *text;

	if (!u)
		return;
	usdt_binary_has_probe(path, provider, probe);
	if (!usdt_add(u, path, -1, provider, probe, "handler")) {
		struct usdt_location loc;
		for (int i = 0; !usdt_location(u, i, &loc); i++)
			;
	}
	text = usdt_text(u, "/* tool */");
	free(text);
	usdt_free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	struct elfsyms *e;
	uint64_t a, b;

	if (!path)
		return 0;
	e = elfsyms_open(path);
	if (e) {
		const char *names[] = { "_PyRuntime", "Py_Version", "take_gil", "f", "" };
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			elfsyms_find(e, names[i]);
		elfsyms_has_symtab(e);
		elfsyms_has_usdt(e);
		elfsyms_is_exec(e);
		elfsyms_bias(e, 0x400000, 0, &a);
		elfsyms_bias(e, 0x7f0000001000, 0x1000, &a);
		elfsyms_close(e);
	}
	elfsyms_section(path, ".AsyncioDebug", &a, &b);
	elfsyms_default_func_offset(path, "f", &a);
	symbols_file_offset(path, "f", 0, &a);
	symbols_file_offset(path, NULL, 0x1000, &a);
	usdt(path, "python", "gc__start");
	usdt(path, "fuzz", "probe");
	return 0;
}
