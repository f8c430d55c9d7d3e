/*
 * Kernel addresses as function names, from /proc/kallsyms, in a compact table of our
 * own rather than libbcc's kernel symcache.
 *
 * libbcc's table costs 13.6 MB here (121,000 symbols, one std::string each) and
 * is filled at the first address it is asked, so a long-running tool's memory stepped
 * up by that much at a random moment (its first kernel stack); it also reads kallsyms
 * for euid 0 only. This one keeps one sorted array of (address, name offset) and the
 * names in one block, 5.1 MB (bench/kallsyms.sh), read by whoever the kernel shows the addresses to
 * (CAP_SYSLOG, or everyone with kernel.kptr_restrict 0 and perf_event_paranoid <= 1).
 *
 * An address is named by the code symbol at or below it, as libbcc does (of several
 * at one address, the first listed); module symbols count too (their "[module]"
 * column is not kept).
 */
#ifndef PYEBPF_KALLSYMS_H
#define PYEBPF_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct kallsyms;

/*
 * Reads path (NULL: /proc/kallsyms). NULL with errno when it cannot be read or
 * memory runs out. Lines with address 0 (the kernel hides the addresses from this
 * reader) are left out, so such a table is empty (kallsyms_count 0).
 */
struct kallsyms *kallsyms_load(const char *path);
void kallsyms_free(struct kallsyms *k);

size_t kallsyms_count(const struct kallsyms *k);

/* The name of the symbol at or below addr, and its address into *at (when not NULL);
 * NULL below the first one. */
const char *kallsyms_name(const struct kallsyms *k, uint64_t addr, uint64_t *at);

#endif
