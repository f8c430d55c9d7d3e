#include "utf8.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if invalid. */
static size_t valid_seq(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF are invalid */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t utf8_repair(const char *in, size_t len, char *out, size_t outsz)
{
	static const char replacement[] = "\xef\xbf\xbd";
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0;

	if (!outsz)
		return 0;
	while (i < len && s[i]) {
		size_t n = valid_seq(s + i, strnlen(in + i, len - i));
		const char *src = n ? in + i : replacement;
		size_t m = n ? n : 3;

		if (o + m >= outsz)
			break;
		memcpy(out + o, src, m);
		o += m;
		i += n ? n : 1;
	}
	out[o] = 0;
	return o;
}
