package main

import (
	"fmt"
	"strconv"
	"strings"
)

// maxPropertiesBytes bounds a --config file; server.properties files are a
// few KiB.
const maxPropertiesBytes = 1 << 20

// property is one key/value from a properties file, with the line its
// logical line starts on (1-based), for error messages.
type property struct {
	Key, Value string
	Line       int
}

// parseProperties parses Java .properties syntax (java.util.Properties.load):
//
//   - a line whose first non-blank character is '#' or '!' is a comment;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks are dropped;
//   - the key ends at the first unescaped '=', ':' or blank; blanks and one
//     '=' or ':' separate it from the value ("k=v", "k: v", "k v");
//   - escapes: \t \n \r \f \uXXXX, and a backslash before any other
//     character stands for that character ("\=" "\:" "\ " "\\").
//
// Later keys override earlier ones, as in Java; every occurrence is returned
// in order so that callers can report the line that won.
func parseProperties(data []byte) ([]property, error) {
	if len(data) > maxPropertiesBytes {
		return nil, fmt.Errorf("file is %d bytes, more than %d", len(data), maxPropertiesBytes)
	}
	lines := splitLines(string(data))
	var out []property
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines.
		logical := line
		for endsWithOddBackslashes(logical) && i+1 < len(lines) {
			i++
			logical = logical[:len(logical)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsWithOddBackslashes(logical) {
			logical = logical[:len(logical)-1] // a continuation at end of file continues into nothing
		}
		rawKey, rawValue := splitKeyValue(logical)
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", start, err)
		}
		value, err := unescape(rawValue)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", start, err)
		}
		out = append(out, property{Key: key, Value: value, Line: start})
	}
	return out, nil
}

// splitLines splits on \n, \r and \r\n, as Java's LineReader does.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

func endsWithOddBackslashes(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits a logical line (leading blanks removed) into its raw
// (still escaped) key and value.
func splitKeyValue(s string) (string, string) {
	keyEnd := len(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' {
			i++ // skip the escaped character
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			keyEnd = i
			break
		}
	}
	key := s[:keyEnd]
	rest := s[keyEnd:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uXXXX escape")
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uXXXX escape %q", s[i-1:i+5])
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
