package deployconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// ParameterOverrides reads the parameter_overrides of a samconfig.toml
// environment ([<env>.deploy.parameters], else [<env>.global.parameters])
// as Key=Value pairs, the way `sam deploy --config-env env` finds them. An
// environment the file does not have gives no overrides and no error: the
// template's defaults apply. The value is a string of space-separated pairs
// ("A=1 B='x y'") or an array of strings, one pair each.
func ParameterOverrides(path, env string) (map[string]string, error) {
	doc, err := readSamconfig(path)
	if err != nil {
		return nil, err
	}
	var (
		value any
		found bool
	)
	for _, command := range []string{"deploy", "global"} {
		if value, found = lookup(doc, env, command, "parameters", "parameter_overrides"); found {
			break
		}
	}
	out := map[string]string{}
	if !found {
		return out, nil
	}
	var pairs []string
	switch v := value.(type) {
	case string:
		if pairs, err = splitWords(v); err != nil {
			return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: %w", path, env, err)
		}
	case []any:
		for _, elem := range v {
			s, ok := elem.(string)
			if !ok {
				return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: array element %v is not a string", path, env, elem)
			}
			pairs = append(pairs, s)
		}
	default:
		return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: want a string or an array of strings, got %T", path, env, value)
	}
	for _, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: %q is not Key=Value", path, env, pair)
		}
		out[k] = v
	}
	return out, nil
}

// readSamconfig decodes a samconfig.toml whole.
func readSamconfig(path string) (map[string]any, error) {
	doc := map[string]any{}
	if _, err := toml.DecodeFile(path, &doc); err != nil {
		return nil, fmt.Errorf("samconfig %s: %w", path, err)
	}
	return doc, nil
}

// lookup follows a path of table names through a decoded TOML document.
func lookup(doc map[string]any, path ...string) (any, bool) {
	var cur any = doc
	for _, name := range path {
		table, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = table[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// splitWords splits on spaces outside quotes and removes the quotes, as
// SAM CLI reads parameter_overrides ("A=1 B=\"x y\"").
func splitWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// HasEnvironment reports whether the samconfig.toml at path has a table of
// the environment env ("[env.deploy.parameters]", "[env.global.parameters]"
// or any other "[env.<command>.parameters]"): `sam deploy --config-env env`
// and ParameterOverrides read nothing for an environment it lacks.
func HasEnvironment(path, env string) (bool, error) {
	doc, err := readSamconfig(path)
	if err != nil {
		return false, err
	}
	commands, ok := doc[env].(map[string]any)
	if !ok {
		return false, nil
	}
	for command := range commands {
		if _, ok := lookup(commands, command, "parameters"); ok {
			return true, nil
		}
	}
	return false, nil
}
