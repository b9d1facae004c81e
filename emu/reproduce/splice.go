package reproduce

import (
	"regexp"
	"strings"
)

// studyHeading matches the heading `emu reproduce` gives a study's
// section: "## Paper 004 (`emu reproduce paper004`, ...".
var studyHeading = regexp.MustCompile("^## Paper [^\\n]*\\(`emu reproduce ([a-z0-9]+)`")

// Splice writes the reproductions file anew from header, keeping what
// was not regenerated: fresh holds the sections just made, by study name;
// a study of order that was not run keeps its section from old, and the
// sections of old that no study wrote (such as the measured runs on
// namespaces) follow, unchanged. So one study can be regenerated without
// running the others.
func Splice(old, header string, order []string, fresh map[string]string) string {
	kept := map[string]string{}
	var other []string
	for _, sec := range sections(old) {
		if m := studyHeading.FindStringSubmatch(sec); m != nil {
			kept[m[1]] = sec
		} else if strings.HasPrefix(sec, "## ") {
			other = append(other, sec)
		}
	}
	var b strings.Builder
	b.WriteString(header)
	for _, name := range order {
		if s, ok := fresh[name]; ok {
			b.WriteString(s)
		} else if s, ok := kept[name]; ok {
			b.WriteString(s)
		}
	}
	for _, s := range other {
		b.WriteString(s)
	}
	return b.String()
}

// sections cuts markdown at its "## " headings: the text before the first
// heading, then each heading with what follows it.
func sections(md string) []string {
	var out []string
	start := 0
	for i := 0; i < len(md); {
		j := strings.IndexByte(md[i:], '\n')
		if j < 0 {
			j = len(md) - i - 1
		}
		if i > start && strings.HasPrefix(md[i:], "## ") {
			out = append(out, md[start:i])
			start = i
		}
		i += j + 1
	}
	if start < len(md) {
		out = append(out, md[start:])
	}
	return out
}
