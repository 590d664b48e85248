"""Write the SAM translation of templates as CloudFormation JSON.

Usage: python sam-translate.py OUTDIR TEMPLATE...

Each TEMPLATE's translation is written to OUTDIR/<its name less .yaml>.sam.json,
and the path of each one written is printed, one a line, in the order given.
One process for every template: the import of cfnlint and samtranslator
is most of the time of a translation.

scripts/test-cfn-lint.sh runs this with the Python that runs cfn-lint, and
lints its output a second time. The translation is cfn-lint's own (the one
it lints a SAM template through: aws-sam-translator with cfn-lint's managed
policy map and placeholder code URIs), minus the Transform key, so that
cfn-lint lints it as plain CloudFormation. The reason: cfn-lint turns rule
W3037 (IAM actions that do not exist) off for every template with the SAM
transform, because SAM's own policy templates name such actions
(aws/serverless-application-model#3633); template.yaml uses none of them,
so its own actions can and should be checked.

Exits 1 with cfn-lint's messages on stderr when a template does not decode
or translate (the others are still written), 3 when this Python cannot
import cfnlint and samtranslator.
"""

import json
import os
import sys

try:
    import cfnlint.decode
    import samtranslator  # noqa: F401 (cfn-lint's transform needs it)
    from cfnlint.template import Template
except ImportError as err:
    # scripts/test-cfn-lint.sh reads 3 as "this Python does not run cfn-lint".
    print(f"sam-translate: {err}", file=sys.stderr)
    sys.exit(3)


def translate(path: str, out: str) -> bool:
    template, problems = cfnlint.decode.decode(path)
    if not problems:
        cfn = Template(path, template, ["us-east-1"])
        problems = cfn.transform()
    if problems:
        for problem in problems:
            print(f"sam-translate: {path}: {problem}", file=sys.stderr)
        return False
    translated = dict(cfn.template)
    translated.pop("Transform", None)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(translated, f, indent=1, default=str)
        f.write("\n")
    return True


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: sam-translate.py OUTDIR TEMPLATE...", file=sys.stderr)
        return 2
    outdir, templates = sys.argv[1], sys.argv[2:]
    status = 0
    for path in templates:
        name = os.path.basename(path)
        if name.endswith(".yaml"):
            name = name[: -len(".yaml")]
        out = os.path.join(outdir, name + ".sam.json")
        if translate(path, out):
            print(out)
        else:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
