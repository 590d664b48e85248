package tests

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTemplateCacheEngine: the CacheEngine parameter chooses redis or valkey
// for every ElastiCache resource the stack creates, each with the engine
// version, default parameter group and serverless major version of that
// engine; the default keeps existing stacks on redis.
func TestTemplateCacheEngine(t *testing.T) {
	tpl := tplLoad(t)
	param := yamlGet(yamlGet(tpl.root, "Parameters"), "CacheEngine")
	if param == nil {
		t.Fatal("Parameters: CacheEngine missing")
	}
	if got := yamlScalars(yamlGet(param, "AllowedValues")); !slices.Equal(got, []string{"redis", "valkey"}) {
		t.Errorf("CacheEngine AllowedValues = %q, want [redis valkey]", got)
	}
	// redis is what every stack ran before the parameter existed: an
	// update that does not name it must not change the cache's engine.
	if got := yamlScalar(yamlGet(param, "Default")); got != "redis" {
		t.Errorf("CacheEngine Default = %q, want redis", got)
	}

	// What each engine must get: the versions `make test` runs against
	// (Redis 7, Valkey 8) and the default cluster-mode parameter group of
	// that family (redis7, valkey8).
	want := map[string]struct{ version, parameterGroup, serverlessMajor string }{
		"redis":  {"7.1", "default.redis7.cluster.on", "7"},
		"valkey": {"8.0", "default.valkey8.cluster.on", "8"},
	}
	type field struct{ typ, property string }
	for _, engine := range []string{"redis", "valkey"} {
		t.Run(engine, func(t *testing.T) {
			resolve := func(n *yaml.Node) string { return tplResolveEngine(t, tpl.root, n, engine) }
			w := want[engine]
			checks := []struct {
				field
				want string
			}{
				{field{"AWS::ElastiCache::ReplicationGroup", "Engine"}, engine},
				{field{"AWS::ElastiCache::ReplicationGroup", "EngineVersion"}, w.version},
				{field{"AWS::ElastiCache::ReplicationGroup", "CacheParameterGroupName"}, w.parameterGroup},
				{field{"AWS::ElastiCache::ServerlessCache", "Engine"}, engine},
				{field{"AWS::ElastiCache::ServerlessCache", "MajorEngineVersion"}, w.serverlessMajor},
				// A Redis OSS cache accepts only user groups of engine
				// redis; a Valkey cache accepts both.
				{field{"AWS::ElastiCache::UserGroup", "Engine"}, engine},
				{field{"AWS::ElastiCache::User", "Engine"}, engine},
			}
			for _, c := range checks {
				resources := tplResources(tpl.root, c.typ)
				if len(resources) == 0 {
					t.Errorf("no %s in the template", c.typ)
				}
				for _, res := range resources {
					got := resolve(yamlGet(yamlGet(res.node, "Properties"), c.property))
					if got != c.want {
						t.Errorf("%s.%s = %q, want %q", res.id, c.property, got, c.want)
					}
				}
			}
			// The three version settings agree with one another: the
			// parameter group's family and the serverless major version
			// are the engine version's major.
			major, _, _ := strings.Cut(w.version, ".")
			if family := "default." + engine + major + ".cluster.on"; w.parameterGroup != family || w.serverlessMajor != major {
				t.Errorf("%s: version %s, parameter group %s, serverless major %s disagree", engine, w.version, w.parameterGroup, w.serverlessMajor)
			}
		})
	}
}

// tplResolveEngine evaluates n, a plain scalar, !Ref CacheEngine or
// !FindInMap [Map, !Ref CacheEngine, Key], with CacheEngine set to engine.
// Anything else fails t.
func tplResolveEngine(t *testing.T, root, n *yaml.Node, engine string) string {
	t.Helper()
	switch {
	case n == nil:
		return "<missing>"
	case n.Kind == yaml.ScalarNode && n.Tag == "!Ref":
		if n.Value != "CacheEngine" {
			t.Errorf("!Ref %s where the engine's settings belong", n.Value)
		}
		return engine
	case n.Kind == yaml.ScalarNode && !strings.HasPrefix(n.Tag, "!"):
		return n.Value
	case n.Kind == yaml.SequenceNode && n.Tag == "!FindInMap" && len(n.Content) == 3:
		top := tplResolveEngine(t, root, n.Content[1], engine)
		entry := yamlGet(yamlGet(yamlGet(yamlGet(root, "Mappings"), n.Content[0].Value), top), n.Content[2].Value)
		if entry == nil {
			t.Errorf("!FindInMap %s: no such mapping entry", yamlString(n))
			return "<missing>"
		}
		return yamlScalar(entry)
	}
	t.Errorf("cannot evaluate %s", yamlString(n))
	return "<unknown>"
}
