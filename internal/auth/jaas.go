package auth

import (
	"fmt"
	"strings"
)

// ParseJAAS parses a sasl.jaas.config value as Kafka writes it:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required
//	    username="admin" password="admin-secret" user_admin="admin-secret";
//
// It returns the login module's class name and its options. Values are
// double-quoted (a backslash escapes the next character) or bare words.
func ParseJAAS(s string) (module string, opts map[string]string, err error) {
	s = strings.TrimSpace(s)
	i := strings.IndexAny(s, " \t\r\n")
	if i < 0 {
		return "", nil, fmt.Errorf("JAAS config %q: expected `LoginModule required key=\"value\" ...;`", s)
	}
	module, s = s[:i], strings.TrimSpace(s[i:])
	flag, rest := s, ""
	if j := strings.IndexAny(s, " \t\r\n;"); j >= 0 {
		flag, rest = s[:j], s[j:]
	}
	switch flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("JAAS config: control flag %q: expected required", flag)
	}
	opts = map[string]string{}
	s = strings.TrimSpace(rest)
	for {
		s = strings.TrimSpace(s)
		if s == "" {
			return "", nil, fmt.Errorf("JAAS config: missing the closing ';'")
		}
		if s[0] == ';' {
			if strings.TrimSpace(s[1:]) != "" {
				return "", nil, fmt.Errorf("JAAS config: only one login module is supported")
			}
			return module, opts, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", nil, fmt.Errorf("JAAS config: expected key=value near %q", clip(s))
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimSpace(s[eq+1:])
		var val strings.Builder
		if strings.HasPrefix(s, `"`) {
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				val.WriteByte(s[j])
			}
			if j >= len(s) {
				return "", nil, fmt.Errorf("JAAS config: unterminated quote for %s", key)
			}
			s = s[j+1:]
		} else {
			j := strings.IndexAny(s, " \t\r\n;")
			if j < 0 {
				j = len(s)
			}
			val.WriteString(s[:j])
			s = s[j:]
		}
		opts[key] = val.String()
	}
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// PlainModule is the class of Kafka's PLAIN login module.
const PlainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// PlainUsersFromJAAS reads the users of a PlainLoginModule configuration:
// every user_NAME="password" option, as Kafka's default PLAIN server
// callback handler does.
func PlainUsersFromJAAS(s string) (PlainUsers, error) {
	module, opts, err := ParseJAAS(s)
	if err != nil {
		return nil, err
	}
	if module != PlainModule {
		return nil, fmt.Errorf("JAAS config: login module %s: PLAIN needs %s", module, PlainModule)
	}
	users := PlainUsers{}
	for k, v := range opts {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users, nil
}
