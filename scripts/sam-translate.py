"""Print the SAM translation of a template as CloudFormation JSON.

Usage: python sam-translate.py TEMPLATE > TRANSLATED.json

scripts/test-cfn-lint.sh runs this with the Python that runs cfn-lint, and
lints its output a second time. The translation is cfn-lint's own (the one
it lints a SAM template through: aws-sam-translator with cfn-lint's managed
policy map and placeholder code URIs), minus the Transform key, so that
cfn-lint lints it as plain CloudFormation. The reason: cfn-lint turns rule
W3037 (IAM actions that do not exist) off for every template with the SAM
transform, because SAM's own policy templates name such actions
(aws/serverless-application-model#3633); template.yaml uses none of them,
so its own actions can and should be checked.

Exits 1 with cfn-lint's messages on stderr when the template does not
decode or translate.
"""

import json
import sys

import cfnlint.decode
from cfnlint.template import Template


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: sam-translate.py TEMPLATE", file=sys.stderr)
        return 2
    path = sys.argv[1]
    template, problems = cfnlint.decode.decode(path)
    if not problems:
        cfn = Template(path, template, ["us-east-1"])
        problems = cfn.transform()
    if problems:
        for problem in problems:
            print(f"sam-translate: {path}: {problem}", file=sys.stderr)
        return 1
    translated = dict(cfn.template)
    translated.pop("Transform", None)
    json.dump(translated, sys.stdout, indent=1, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
