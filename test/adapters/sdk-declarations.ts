/**
 * What an SDK's type declarations say, read at run time with the TypeScript compiler: the `type` of each member of a
 * union (`ResponseOutputItem`), members declared in a namespace or through `extends` included. The declarations are
 * those of the SDK installed in the repository (resolved with Node's resolver, not the test's), so a tag the SDK adds
 * when it is updated fails the test that holds its table to them until it is read on purpose.
 */
import { createRequire } from 'node:module';
import ts from 'typescript';

/** The `type` literal of each member of the exported union `union` in the declarations beside the module `specifier`. */
export function unionTags(specifier: string, union: string): string[] {
  const file = createRequire(import.meta.url)
    .resolve(specifier)
    .replace(/\.(c|m)?js$/, '.d.$1ts');
  const program = ts.createProgram([file], { noEmit: true, skipLibCheck: true, types: [] });
  const source = program.getSourceFile(file);
  if (!source) throw new Error(`no declarations at ${file}`);
  const checker = program.getTypeChecker();
  let alias: ts.TypeAliasDeclaration | undefined;
  source.forEachChild((node) => {
    if (ts.isTypeAliasDeclaration(node) && node.name.text === union) alias = node;
  });
  if (!alias) throw new Error(`no type ${union} in ${file}`);
  const type = checker.getTypeAtLocation(alias.name);
  if (!type.isUnion()) throw new Error(`${union} in ${file} is not a union`);
  return type.types.map((member) => {
    const tag = member.getProperty('type');
    const tagType = tag ? checker.getTypeOfSymbol(tag) : undefined;
    if (!tagType?.isStringLiteral())
      throw new Error(`a member of ${union} without a literal type: ${checker.typeToString(member)}`);
    return tagType.value;
  });
}
