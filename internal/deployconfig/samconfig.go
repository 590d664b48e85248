package deployconfig

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ParameterOverrides reads the parameter_overrides of a samconfig.toml
// environment ([<env>.deploy.parameters], else [<env>.global.parameters])
// as Key=Value pairs. An environment the file does not have gives no
// overrides and no error: the template's defaults apply.
//
// It reads only what SAM CLI writes there, not all of TOML: a basic or
// literal string ("A=1 B='x y'") or an array of such strings.
func ParameterOverrides(path, env string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read samconfig: %w", err)
	}
	defer f.Close()

	wanted := map[string]int{"[" + env + ".deploy.parameters]": 2, "[" + env + ".global.parameters]": 1}
	var best string
	bestRank := 0
	section := 0
	sc := bufio.NewScanner(f)
	var pending strings.Builder // a multi-line array being read
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending.Len() > 0 {
			pending.WriteString(" " + line)
			if strings.Contains(line, "]") {
				if section > bestRank {
					best, bestRank = pending.String(), section
				}
				pending.Reset()
			}
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = wanted[strings.ReplaceAll(line, " ", "")]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if section == 0 || !ok || strings.TrimSpace(key) != "parameter_overrides" {
			continue
		}
		value = strings.TrimSpace(value)
		if strings.HasPrefix(value, "[") && !strings.Contains(value, "]") {
			pending.WriteString(value)
			continue
		}
		if section > bestRank {
			best, bestRank = value, section
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read samconfig %s: %w", path, err)
	}
	if bestRank == 0 {
		return map[string]string{}, nil
	}
	strs, err := tomlStrings(best)
	if err != nil {
		return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: %w", path, env, err)
	}
	// A string holds space-separated pairs; an array holds one pair per
	// element.
	isArray := strings.HasPrefix(strings.TrimSpace(best), "[")
	out := map[string]string{}
	for _, s := range strs {
		tokens := []string{s}
		if !isArray {
			tokens, err = splitWords(s)
			if err != nil {
				return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: %w", path, env, err)
			}
		}
		for _, tok := range tokens {
			k, v, ok := strings.Cut(tok, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("samconfig %s [%s]: parameter_overrides: %q is not Key=Value", path, env, tok)
			}
			out[k] = v
		}
	}
	return out, nil
}

// tomlStrings parses a TOML string or a one-level array of strings.
func tomlStrings(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") {
		s, rest, err := tomlString(v)
		if err != nil {
			return nil, err
		}
		if r := strings.TrimSpace(rest); r != "" && !strings.HasPrefix(r, "#") {
			return nil, fmt.Errorf("unexpected %q after the string", r)
		}
		return []string{s}, nil
	}
	rest := strings.TrimSpace(v[1:])
	var out []string
	for {
		rest = strings.TrimLeft(rest, " \t,")
		if strings.HasPrefix(rest, "]") {
			return out, nil
		}
		if rest == "" {
			return nil, errors.New("unterminated array")
		}
		s, r, err := tomlString(rest)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		rest = r
	}
}

// tomlString parses one basic ("...") or literal ('...') string at the
// start of v and returns the rest.
func tomlString(v string) (string, string, error) {
	switch {
	case strings.HasPrefix(v, `'`):
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", "", errors.New("unterminated literal string")
		}
		return v[1 : end+1], v[end+2:], nil
	case strings.HasPrefix(v, `"`):
		for i := 1; i < len(v); i++ {
			switch v[i] {
			case '\\':
				i++
			case '"':
				s, err := strconv.Unquote(v[:i+1])
				if err != nil {
					return "", "", fmt.Errorf("string %s: %w", v[:i+1], err)
				}
				return s, v[i+1:], nil
			}
		}
		return "", "", errors.New("unterminated string")
	}
	return "", "", fmt.Errorf("want a string, got %q", v)
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
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("read samconfig: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.ReplaceAll(strings.TrimSpace(sc.Text()), " ", "")
		if strings.HasPrefix(line, "["+env+".") && strings.HasSuffix(line, "]") {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read samconfig %s: %w", path, err)
	}
	return false, nil
}
