// Package sfv parses RFC 9651 structured-field Lists strictly, for tests
// that check rate-limit headers (RateLimit, RateLimit-Policy) as a client's
// parser would read them. It is test support: no code that ships imports
// it.
package sfv

import (
	"fmt"
	"strconv"
	"strings"
)

// Item is one member of an RFC 9651 structured-field List that is an
// Item (inner lists are refused: no rate-limit header has them): its bare
// item, as a Go value (int64, float64, string for strings and tokens,
// bool, []byte), and its parameters in order.
type Item struct {
	Value  any
	Token  bool // Value is a token, not a string
	Params []Param
}

// Param is one parameter of an Item: its key and its bare item.
type Param struct {
	Key   string
	Value any
}

// Param returns the value of the parameter key.
func (i Item) Param(key string) (any, bool) {
	for _, p := range i.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return nil, false
}

// ParseList parses a field value as an RFC 9651 List of Items (section
// 4.2.1), strictly: anything the grammar does not allow is an error.
func ParseList(field string) ([]Item, error) {
	p := &parser{s: strings.Trim(field, " ")}
	var items []Item
	if p.s == "" {
		return nil, nil
	}
	for {
		if p.peek() == '(' {
			return nil, p.errorf("inner lists are not expected")
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.ows()
		if p.done() {
			return items, nil
		}
		if p.next() != ',' {
			return nil, p.errorf("want ',' between list members")
		}
		p.ows()
		if p.done() {
			return nil, p.errorf("trailing ','")
		}
	}
}

type parser struct {
	s   string
	pos int
}

func (p *parser) done() bool { return p.pos >= len(p.s) }

func (p *parser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.pos]
}

func (p *parser) next() byte {
	c := p.peek()
	p.pos++
	return c
}

func (p *parser) ows() {
	for !p.done() && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) errorf(format string, a ...any) error {
	return fmt.Errorf("structured field %q at %d: %s", p.s, p.pos, fmt.Sprintf(format, a...))
}

func (p *parser) item() (Item, error) {
	v, token, err := p.bareItem()
	if err != nil {
		return Item{}, err
	}
	it := Item{Value: v, Token: token}
	for p.peek() == ';' {
		p.pos++
		for p.peek() == ' ' {
			p.pos++
		}
		key, err := p.key()
		if err != nil {
			return Item{}, err
		}
		var val any = true
		if p.peek() == '=' {
			p.pos++
			if val, _, err = p.bareItem(); err != nil {
				return Item{}, err
			}
		}
		it.Params = append(it.Params, Param{Key: key, Value: val})
	}
	return it, nil
}

func (p *parser) key() (string, error) {
	start := p.pos
	c := p.peek()
	if (c < 'a' || c > 'z') && c != '*' {
		return "", p.errorf("a key starts with a lower-case letter or '*'")
	}
	for !p.done() {
		c := p.s[p.pos]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '*' {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos], nil
}

func (p *parser) bareItem() (any, bool, error) {
	switch c := p.peek(); {
	case c == '-' || (c >= '0' && c <= '9'):
		v, err := p.number()
		return v, false, err
	case c == '"':
		v, err := p.str()
		return v, false, err
	case c == '*' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		start := p.pos
		p.pos++
		for !p.done() && isTChar(p.s[p.pos]) {
			p.pos++
		}
		return p.s[start:p.pos], true, nil
	case c == '?':
		p.pos++
		switch p.next() {
		case '0':
			return false, false, nil
		case '1':
			return true, false, nil
		}
		return nil, false, p.errorf("a boolean is ?0 or ?1")
	default:
		return nil, false, p.errorf("no bare item starts with %q", c)
	}
}

func (p *parser) number() (any, error) {
	start := p.pos
	if p.peek() == '-' {
		p.pos++
	}
	digits, dot := 0, -1
	for !p.done() {
		c := p.s[p.pos]
		if c >= '0' && c <= '9' {
			digits++
			p.pos++
			continue
		}
		if c == '.' && dot < 0 {
			dot = digits
			p.pos++
			continue
		}
		break
	}
	text := p.s[start:p.pos]
	switch {
	case digits == 0:
		return nil, p.errorf("a number without digits")
	case dot < 0:
		if digits > 15 {
			return nil, p.errorf("an integer of more than 15 digits")
		}
		return strconv.ParseInt(text, 10, 64)
	case dot > 12 || digits-dot < 1 || digits-dot > 3:
		return nil, p.errorf("a decimal is up to 12 digits, '.', 1 to 3 digits")
	}
	return strconv.ParseFloat(text, 64)
}

func (p *parser) str() (string, error) {
	p.pos++ // the opening quote
	var b strings.Builder
	for !p.done() {
		c := p.next()
		switch {
		case c == '\\':
			e := p.next()
			if e != '"' && e != '\\' {
				return "", p.errorf("only \\\" and \\\\ are escapes")
			}
			b.WriteByte(e)
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errorf("a string holds printable ASCII only")
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errorf("unterminated string")
}

// isTChar is RFC 9110's tchar, with ':' and '/', as a token allows.
func isTChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}
