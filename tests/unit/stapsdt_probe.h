/*
 * USDT probes in a unit test binary itself, written with the same assembler
 * directives as <sys/sdt.h> (not installed here), so tests read them back through
 * libbcc like any target's: TEST_PROBE(provider, name, argument specs, semaphore).
 */
#ifndef PYEBPF_TEST_STAPSDT_PROBE_H
#define PYEBPF_TEST_STAPSDT_PROBE_H

/* One .note.stapsdt entry: location, base, semaphore, provider, name, argument specs */
#define TEST_PROBE(provider, name, args, sem)                                              \
	__asm__ __volatile__("990: nop\n"                                                  \
			     ".pushsection .note.stapsdt,\"?\",\"note\"\n"                 \
			     ".balign 4\n"                                                 \
			     ".4byte 992f-991f, 994f-993f, 3\n"                            \
			     "991: .asciz \"stapsdt\"\n"                                   \
			     "992: .balign 4\n"                                            \
			     "993: .8byte 990b\n"                                          \
			     ".8byte _.stapsdt.base\n"                                     \
			     ".8byte " sem "\n"                                            \
			     ".asciz \"" provider "\"\n"                                   \
			     ".asciz \"" name "\"\n"                                       \
			     ".asciz \"" args "\"\n"                                       \
			     "994: .balign 4\n"                                            \
			     ".popsection\n"                                               \
			     ".ifndef _.stapsdt.base\n"                                    \
			     ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
			     ".weak _.stapsdt.base\n"                                      \
			     ".hidden _.stapsdt.base\n"                                    \
			     "_.stapsdt.base: .space 1\n"                                  \
			     ".size _.stapsdt.base, 1\n"                                   \
			     ".popsection\n"                                               \
			     ".endif\n")

#endif
