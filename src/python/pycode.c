/* pyproc, part: what a (code object, instruction) pair means, with a cache of code objects. */
#include <stdio.h>
#include <stdlib.h>

#include "pylines.h"
#include "pyproc_impl.h"


static void unknown_loc(struct pycode_loc *loc)
{
	snprintf(loc->func, sizeof(loc->func), "[unknown]");
	loc->file[0] = 0;
	loc->line = 0;
	loc->firstlineno = 0;
}

static int load_code(struct pyproc *p, uint64_t code, struct code_entry *e)
{
	const struct pyoffsets *o = &p->off;
	uint64_t name, file, table;
	int32_t first;
	int64_t tlen;

	if (pyproc_read(p, code + o->co_firstlineno, &first, 4))
		return -1;
	name = pyproc_u64_or0(p, code + (o->co_qualname != PYOFF_NONE ? o->co_qualname : o->co_name));
	file = pyproc_u64_or0(p, code + o->co_filename);
	table = pyproc_u64_or0(p, code + o->co_linetable);
	if (!name || !file || pyproc_read_str(p, name, e->func, sizeof(e->func)) ||
	    pyproc_read_str(p, file, e->file, sizeof(e->file)))
		return -1;
	free(e->table);
	e->table = NULL;
	e->table_len = 0;
	/* PyBytes: ob_size at 16, data at 32 */
	if (table && !pyproc_read(p, table + 16, &tlen, 8) && tlen > 0 && tlen < (1 << 20)) {
		e->table = malloc((size_t)tlen);
		if (e->table && !pyproc_read(p, table + 32, e->table, (size_t)tlen))
			e->table_len = (size_t)tlen;
	}
	e->firstlineno = first;
	e->code = code;
	return 0;
}

int pyproc_code_location(struct pyproc *p, uint64_t code, uint32_t instr, uint32_t check,
			 struct pycode_loc *loc)
{
	struct code_entry *e = &p->codes[(code >> 4) & (CODE_CACHE_SIZE - 1)];

	if (!code) {
		unknown_loc(loc);
		return -1;
	}
	/* a cached object whose firstlineno changed was freed and the memory reused */
	if (e->code != code || (check && (uint32_t)e->firstlineno != check)) {
		e->code = 0;
		if (load_code(p, code, e)) {
			e->code = 0;
			unknown_loc(loc);
			return -1;
		}
	}
	snprintf(loc->func, sizeof(loc->func), "%s", e->func);
	snprintf(loc->file, sizeof(loc->file), "%s", e->file);
	loc->firstlineno = e->firstlineno;
	loc->line = e->table ? pylines_line(p->off.minor, e->table, e->table_len, e->firstlineno, instr)
			     : 0;
	return 0;
}

