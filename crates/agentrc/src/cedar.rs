//! The Cedar layer of agentrc Agentfiles: the policies of every `POLICY … END`
//! block (and of every `ALLOW`/`DENY` shorthand, lowered to Cedar) parsed by
//! the `cedar-policy` crate into one policy set, and one request decided
//! against it.
//!
//! The language is Cedar's, whole: deny by default, a `forbid` that matches
//! overrides every `permit`, a policy whose condition errors is skipped. What
//! this module adds is what an Agentfile needs around it:
//!
//! - problems at byte ranges of the Agentfile, so the front end can point at
//!   `line:col` inside the block (each block is parsed on its own, so the
//!   parser's offsets are offsets into that block);
//! - a name for every policy that says where it is (`policy at line 12`), or
//!   the one its `@id("…")` gives it;
//! - the agentrc vocabulary checked: entity types in the `AgentRC::`
//!   namespace, actions from [`ACTIONS`], no templates.
//!
//! Requests are built without a schema and against no entities: the
//! principal, action and resource are compared by equality (`in` holds only
//! for the entity itself), the context is a record of strings (and `port` as
//! a number).
//!
//! What this is not: the reader of the Agentfile (it finds the blocks,
//! [`crate::syntax`]) nor the gate that asks for decisions (the tools'
//! `policy::declared`, which holds the compiled [`Policies`] as an
//! [`Authorize`] carried by the plan, and knows neither Cedar nor agentrc).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, AuthorizationError, Authorizer, Context, Effect, Entities, EntityId,
    EntityTypeName, EntityUid, Policy, PolicyId, PolicySet, PrincipalConstraint, Request,
    ResourceConstraint, RestrictedExpression, Template,
};

use agentfile_config::text;
use agentfile_plan::declared::{Authorize, Verdict};
use agentfile_plan::diag;

/// The namespace every entity type of an Agentfile policy lives in.
pub const NAMESPACE: &str = "AgentRC";

/// The actions a policy may name: `AgentRC::Action::"<one of these>"`.
pub const ACTIONS: &[&str] = &[
    "tool.invoke",
    "filesystem.read",
    "filesystem.write",
    "network.connect",
    "network.egress",
    "cred.resolve",
    "function.invoke",
    "mcp.request",
    "agent.delegate",
];

/// Other names for an action, `(alias, action)`: a policy or a request that
/// uses the alias means the action.
const ALIASES: &[(&str, &str)] = &[("network.egress", "network.connect")];

/// Context keys whose value is a Cedar `Long` when it reads as an integer, so
/// that `context.port == 443` and `context.port < 1024` work.
const NUMBER_KEYS: &[&str] = &["port"];

/// How much of a policy's text a decision's [`Decision::rule`] quotes.
const EXCERPT_CHARS: usize = 60;

// Cedar's parser recurses once per level of nesting, with large frames (tens
// of KiB a level in a debug build), and its syntax trees are dropped
// recursively: 100 nested parentheses overflow a 2 MiB thread stack, which
// aborts the process. So the text is measured before Cedar sees it, and
// parsed on a thread with a stack of its own.

/// The deepest nesting of `(`, `[` and `{` a block may have.
const MAX_NESTING: usize = 32;

/// The most operators (and brackets, `if`s, and commas between list
/// elements and record fields) one policy may have: a bound on the depth of
/// its syntax tree, which is dropped on the caller's stack, and on the
/// memory its parse takes (about 2 KiB an operator while it is parsed).
const MAX_OPERATORS: usize = 2048;

/// Policies parsed at once, at most: Cedar's concrete syntax tree takes some
/// 5 KiB a policy until it is turned into policies, while each call of its
/// parser costs about as much as a short policy.
const CHUNK_POLICIES: usize = 64;

/// Bytes of policy text parsed at once, past which a piece ends at its next
/// policy's end.
const CHUNK_BYTES: usize = 16 << 10;

/// The most policies one Agentfile may hold. A parsed policy takes some
/// 3 KiB however short its text (`permit(principal, action, resource);` is
/// 37 bytes), so the count, not the file's size, bounds the memory.
pub const MAX_POLICIES: usize = 10_000;

/// The most operators (as [`MAX_OPERATORS`] counts them) all the policies of
/// one Agentfile may have together: about 350 bytes each once parsed.
pub const MAX_FILE_OPERATORS: usize = 100_000;

/// The stack of the thread that parses (reserved, touched only as needed).
const PARSE_STACK: usize = 64 << 20;

/// One block of Cedar text and where it is in the Agentfile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block<'a> {
    pub text: &'a str,
    /// Byte offset of `text` in the Agentfile.
    pub offset: usize,
    /// The 1-based line of the Agentfile that `offset` is on.
    pub line: u32,
    /// The text was generated from a directive (an `ALLOW`/`DENY` shorthand)
    /// rather than read from the file: its offsets are not the file's, so
    /// every problem in it is reported at `offset`.
    pub generated: bool,
}

impl<'a> From<&'a agentfile_plan::declared::Block> for Block<'a> {
    /// A declared `POLICY` block (or the policy a shorthand generated).
    fn from(b: &'a agentfile_plan::declared::Block) -> Block<'a> {
        Block {
            text: &b.text,
            offset: b.offset,
            line: b.line,
            generated: b.kind == "shorthand",
        }
    }
}

/// Something wrong with the Cedar of an Agentfile, at a byte range of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub start: usize,
    pub end: usize,
    /// What is wrong, in one line.
    pub message: String,
}

/// Every policy of one Agentfile, ready to decide requests.
#[derive(Debug)]
pub struct Policies {
    set: PolicySet,
    authorizer: Authorizer,
    entities: Entities,
    /// What a decision says about each policy.
    about: HashMap<PolicyId, About>,
    /// Actions that some `permit` names, in its scope or its conditions.
    permitted_names: HashSet<String>,
}

#[derive(Debug)]
struct About {
    /// Position among all the policies of the file, for a stable order.
    order: usize,
    effect: Effect,
    /// The policy's text from its effect on, on one line, shortened.
    excerpt: String,
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The ids of the policies that decided, in file order: the permits that
    /// matched when allowed, the forbids that matched when denied. Empty when
    /// denied because nothing permits.
    pub policies: Vec<String>,
    /// Policies that failed to evaluate (Cedar skips them) and requests that
    /// could not be built, in words.
    pub errors: Vec<String>,
    rule: String,
}

impl Decision {
    /// What decided, in one short line for an event's `rule`:
    /// `cedar: forbid policy at line 12 (forbid(principal, action == …)`.
    pub fn rule(&self) -> String {
        self.rule.clone()
    }

    fn refused(error: String) -> Decision {
        Decision {
            allowed: false,
            policies: Vec::new(),
            rule: format!("cedar: the request is invalid: {error}"),
            errors: vec![error],
        }
    }
}

impl Policies {
    /// Parse every block into one policy set. Each block is parsed on its
    /// own; all of the problems of all of the blocks come back together.
    pub fn parse(blocks: &[Block<'_>]) -> Result<Policies, Vec<Problem>> {
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name("cedar-parse".to_owned())
                .stack_size(PARSE_STACK)
                .spawn_scoped(scope, || Policies::parse_here(blocks));
            match worker {
                Ok(worker) => worker.join().unwrap_or_else(|_| {
                    let start = blocks.first().map_or(0, |b| b.offset);
                    let end = blocks.last().map_or(0, |b| b.offset + b.text.len());
                    Err(vec![Problem {
                        start,
                        end: end.max(start),
                        message:
                            "the Cedar parser failed on these policies (a bug in cedar-policy)"
                                .to_owned(),
                    }])
                }),
                // No thread: parse on this one; the limits keep the stack
                // Cedar needs small.
                Err(_) => Policies::parse_here(blocks),
            }
        })
    }

    fn parse_here(blocks: &[Block<'_>]) -> Result<Policies, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut set = PolicySet::new();
        let mut about = HashMap::new();
        let mut permitted_names = HashSet::new();
        // Id → the line of the policy that has it, for duplicate messages.
        let mut taken: HashMap<String, u32> = HashMap::new();
        // A few policies at a time: Cedar's concrete syntax tree takes some
        // 5 KiB a policy, so a block parsed whole holds that much for every
        // policy of the file at once (a 50 MB file took more than 4 GiB).
        let (mut policies, mut operators) = (0usize, 0usize);
        'pieces: for piece in blocks.iter().flat_map(split) {
            let block = &piece;
            match measure(block) {
                Ok(n) => operators += n,
                Err(problem) => {
                    problems.push(problem);
                    continue;
                }
            }
            if operators > MAX_FILE_OPERATORS {
                problems.push(whole(
                    block,
                    format!("the policies hold more than {MAX_FILE_OPERATORS} operators together, more than an Agentfile may: the policies from here on are not read"),
                ));
                break 'pieces;
            }
            let parsed = match PolicySet::from_str(block.text) {
                Ok(parsed) => parsed,
                Err(errors) => {
                    problems.extend(errors.iter().map(|e| parse_problem(e, block)));
                    continue;
                }
            };
            for statement in statements(&parsed, block) {
                let (range, line) = (statement.range, statement.line);
                let at = |message: String| Problem {
                    start: range.0,
                    end: range.1,
                    message,
                };
                policies += 1;
                if policies > MAX_POLICIES {
                    problems.push(at(format!(
                        "more than {MAX_POLICIES} policies, more than an Agentfile may hold: the policies from here on are not read"
                    )));
                    break 'pieces;
                }
                let policy = match statement.item {
                    Item::Template(t) => {
                        problems.push(at(template_message(t)));
                        continue;
                    }
                    Item::Policy(p) => p,
                };
                let mut wrong = check(policy);
                let id = match policy.annotation("id") {
                    Some(id) if id.trim().is_empty() => {
                        wrong.push("`@id` must not be empty".to_owned());
                        String::new()
                    }
                    Some(id) => {
                        if let Some(other) = taken.get(id) {
                            wrong.push(format!(
                                "duplicate policy id `{id}`: the policy at line {other} has it already"
                            ));
                        }
                        id.to_owned()
                    }
                    None => free_id(&taken, line),
                };
                if !wrong.is_empty() {
                    problems.extend(wrong.into_iter().map(at));
                    continue;
                }
                taken.insert(id.clone(), line);
                let id = PolicyId::new(&id);
                let policy = match canonical(policy, &id) {
                    Ok(p) => p,
                    Err(e) => {
                        problems.push(at(e.to_string()));
                        continue;
                    }
                };
                let effect = policy.effect();
                if effect == Effect::Permit {
                    permitted_names.extend(
                        policy
                            .entity_literals()
                            .iter()
                            .filter(|u| is_action_type(u.type_name()))
                            .map(|u| u.id().unescaped().to_owned()),
                    );
                }
                if let Err(e) = set.add(policy) {
                    problems.push(at(one_line(&e.to_string())));
                    continue;
                }
                let order = about.len();
                about.insert(
                    id,
                    About {
                        order,
                        effect,
                        excerpt: excerpt(&statement.text),
                    },
                );
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Policies {
            set,
            authorizer: Authorizer::new(),
            entities: Entities::empty(),
            about,
            permitted_names,
        })
    }

    /// How many policies there are.
    pub fn len(&self) -> usize {
        self.about.len()
    }

    pub fn is_empty(&self) -> bool {
        self.about.is_empty()
    }

    /// Decide one request: may `AgentRC::Agent::"<agent>"` do
    /// `AgentRC::Action::"<action>"` on `AgentRC::<resource_type>::"<resource_id>"`,
    /// with a context record of `context`'s pairs?
    pub fn authorize(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource_id: &str,
        context: &[(&str, &str)],
    ) -> Decision {
        match self.request(agent, action, resource_type, resource_id, context) {
            Ok(request) => self.decide(&request),
            Err(e) => Decision::refused(e.to_string()),
        }
    }

    /// Like [`Policies::authorize`], as if the file also had
    /// `permit(principal, action == AgentRC::Action::"<action>", resource);`:
    /// allowed unless a `forbid` matches. For actions no permit of the file
    /// names (see [`Policies::permits_name`]), so that the file's forbids
    /// still apply to them.
    pub fn authorize_with_default_permit(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource_id: &str,
        context: &[(&str, &str)],
    ) -> Decision {
        let request = match self.request(agent, action, resource_type, resource_id, context) {
            Ok(request) => request,
            Err(e) => return Decision::refused(e.to_string()),
        };
        let mut d = self.decide(&request);
        // Cedar allows when a permit matches and no forbid does. The added
        // permit always matches, so only the forbids count: a denial that no
        // forbid caused becomes an allow.
        if !d.allowed && d.policies.is_empty() {
            let action = canonical_action(action);
            d.allowed = true;
            d.policies = vec![format!("default permit of {action}")];
            d.rule =
                format!("cedar: default permit of {action} (no permit of the Agentfile names it)");
        }
        d
    }

    /// Whether some `permit` names `AgentRC::Action::"<action>"`, in its
    /// scope or in its conditions (an alias names its action).
    pub fn permits_name(&self, action: &str) -> bool {
        self.permitted_names.contains(canonical_action(action))
    }

    /// Whether some `permit`'s scope (principal, action, resource) matches
    /// the request, whatever its conditions and the forbids: `false` means
    /// no context can make the request allowed.
    pub fn could_permit(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource_id: &str,
    ) -> bool {
        let Ok((principal, action, resource)) = uids(agent, action, resource_type, resource_id)
        else {
            return false;
        };
        self.set.policies().any(|p| {
            p.effect() == Effect::Permit
                && principal_matches(&p.principal_constraint(), &principal)
                && action_matches(&p.action_constraint(), &action)
                && resource_matches(&p.resource_constraint(), &resource)
        })
    }

    fn request(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource_id: &str,
        context: &[(&str, &str)],
    ) -> Result<Request, Invalid> {
        let (principal, action, resource) = uids(agent, action, resource_type, resource_id)?;
        let context =
            Context::from_pairs(context.iter().map(|&(k, v)| (k.to_owned(), value(k, v))))
                .map_err(|e| Invalid::Context(Box::new(e)))?;
        Request::new(principal, action, resource, context, None)
            .map_err(|e| Invalid::Request(Box::new(e)))
    }

    fn decide(&self, request: &Request) -> Decision {
        let response = self
            .authorizer
            .is_authorized(request, &self.set, &self.entities);
        let allowed = response.decision() == cedar_policy::Decision::Allow;
        let diagnostics = response.diagnostics();
        let mut deciding: Vec<&PolicyId> = diagnostics.reason().collect();
        deciding.sort_by_key(|id| self.about.get(*id).map_or(usize::MAX, |a| a.order));
        let errors: Vec<String> = diagnostics
            .errors()
            .map(|e| match e {
                AuthorizationError::PolicyEvaluationError(e) => format!(
                    "{} was skipped: {}",
                    e.policy_id(),
                    one_line(&e.inner().to_string())
                ),
            })
            .collect();
        let rule = match deciding.first() {
            Some(first) => {
                let mut rule = match self.about.get(*first) {
                    Some(a) => format!("cedar: {} {first} ({})", effect_word(a.effect), a.excerpt),
                    None => format!("cedar: {first}"),
                };
                if deciding.len() > 1 {
                    let _ = write!(rule, " and {} more", deciding.len() - 1);
                }
                rule
            }
            None if allowed => "cedar: allowed".to_owned(),
            None if errors.is_empty() => "cedar: no policy permits it (deny by default)".to_owned(),
            None => format!(
                "cedar: no policy permits it (deny by default; {} skipped on an error)",
                plural(errors.len(), "policy", "policies")
            ),
        };
        Decision {
            allowed,
            policies: deciding.iter().map(|id| id.to_string()).collect(),
            errors,
            rule,
        }
    }
}

impl From<Decision> for Verdict {
    fn from(d: Decision) -> Verdict {
        Verdict {
            allowed: d.allowed,
            rule: d.rule,
            errors: d.errors,
        }
    }
}

impl Authorize for Policies {
    fn authorize(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource: &str,
        context: &[(&str, &str)],
    ) -> Verdict {
        Policies::authorize(self, agent, action, resource_type, resource, context).into()
    }

    fn authorize_with_default_permit(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource: &str,
        context: &[(&str, &str)],
    ) -> Verdict {
        Policies::authorize_with_default_permit(
            self,
            agent,
            action,
            resource_type,
            resource,
            context,
        )
        .into()
    }

    fn permits_name(&self, action: &str) -> bool {
        Policies::permits_name(self, action)
    }
}

/// A policy or template of a block, with where it is.
struct Statement<'p> {
    item: Item<'p>,
    /// Byte range in the Agentfile.
    range: (usize, usize),
    /// The Agentfile line it starts on.
    line: u32,
    text: String,
}

enum Item<'p> {
    Policy(&'p Policy),
    Template(&'p Template),
}

/// The policies and templates of a parsed block in the order they are
/// written, each located in the block.
///
/// The parser names them `policy0`, `policy1`, … in order and keeps each
/// one's text, a slice of the block from its first annotation to its `;`.
/// Between two of them there are only blanks and comments, so each text is
/// found right after the previous one (or, should that ever fail, searched
/// for from there).
fn statements<'p>(parsed: &'p PolicySet, block: &Block<'_>) -> Vec<Statement<'p>> {
    let order = |id: &PolicyId| {
        id.to_string()
            .strip_prefix("policy")
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    };
    let mut items: Vec<(usize, Item<'p>, String)> = parsed
        .policies()
        .map(|p| {
            (
                order(p.id()),
                Item::Policy(p),
                p.to_cedar().unwrap_or_default(),
            )
        })
        .chain(
            parsed
                .templates()
                .map(|t| (order(t.id()), Item::Template(t), t.to_cedar())),
        )
        .collect();
    items.sort_by_key(|(n, _, _)| *n);
    let src = block.text;
    let mut cursor = 0;
    // The line of `cursor`, counted as the cursor moves.
    let mut line = block.line;
    let mut out = Vec::with_capacity(items.len());
    for (_, item, text) in items {
        let start = skip_trivia(src, cursor);
        let start = if src.get(start..).is_some_and(|rest| rest.starts_with(&text)) {
            Some(start)
        } else {
            src.get(cursor..)
                .and_then(|rest| rest.find(&text))
                .map(|i| cursor + i)
        };
        let (range, end) = match start {
            Some(start) if !text.is_empty() => {
                let end = start + text.len();
                line += count_lines(src.get(cursor..start).unwrap_or(""));
                cursor = start;
                ((start, end), end)
            }
            _ => ((0, src.len()), cursor),
        };
        let range = if block.generated {
            (block.offset, block.offset)
        } else {
            (block.offset + range.0, block.offset + range.1)
        };
        out.push(Statement {
            item,
            range,
            line,
            text,
        });
        line += count_lines(src.get(cursor..end).unwrap_or(""));
        cursor = end;
    }
    out
}

/// `block` cut into pieces of whole policies, each a block of its own at its
/// place in the file: after the `;` (outside strings and `//` comments) that
/// ends the [`CHUNK_POLICIES`]th policy of a piece, or a policy that brings
/// it past [`CHUNK_BYTES`]. What follows the last `;` is a piece when it
/// holds more than whitespace and comments.
fn split<'a>(block: &Block<'a>) -> Vec<Block<'a>> {
    let text = block.text;
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut start, mut line) = (0, 0, block.line);
    let mut ends = 0;
    let piece = |start: usize, end: usize, line: &mut u32| {
        let t = &text[start..end];
        let b = Block {
            text: t,
            offset: if block.generated {
                block.offset
            } else {
                block.offset + start
            },
            line: *line,
            generated: block.generated,
        };
        *line = line.saturating_add(count_lines(t));
        b
    };
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b';' => {
                ends += 1;
                if ends == CHUNK_POLICIES || i + 1 - start >= CHUNK_BYTES {
                    out.push(piece(start, i + 1, &mut line));
                    start = i + 1;
                    ends = 0;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if skip_trivia(text, start) < text.len() || out.is_empty() {
        out.push(piece(start, text.len(), &mut line));
    }
    out
}

fn count_lines(s: &str) -> u32 {
    u32::try_from(s.bytes().filter(|&b| b == b'\n').count()).unwrap_or(u32::MAX)
}

/// The first byte at or after `i` that is neither whitespace nor part of a
/// `//` comment.
fn skip_trivia(s: &str, mut i: usize) -> usize {
    loop {
        let Some(rest) = s.get(i..) else { return i };
        let trimmed = rest.trim_start();
        i += rest.len() - trimmed.len();
        if trimmed.starts_with("//") {
            i += trimmed.find('\n').unwrap_or(trimmed.len());
        } else {
            return i;
        }
    }
}

/// `policy at line N`, or `policy K at line N` when another policy on that
/// line has it already.
fn free_id(taken: &HashMap<String, u32>, line: u32) -> String {
    let first = format!("policy at line {line}");
    if !taken.contains_key(&first) {
        return first;
    }
    (2..)
        .map(|k| format!("policy {k} at line {line}"))
        .find(|id| !taken.contains_key(id))
        .unwrap_or(first)
}

/// A problem over the whole of `block` (at its start when generated).
fn whole(block: &Block<'_>, message: String) -> Problem {
    let start = block.offset + skip_trivia(block.text, 0).min(block.text.len());
    let end = if block.generated {
        start
    } else {
        block.offset + block.text.trim_end().len()
    };
    Problem {
        start,
        end: end.max(start),
        message,
    }
}

/// How many operators `block` has, or a problem where it nests deeper than
/// [`MAX_NESTING`] or a policy of it has more than [`MAX_OPERATORS`].
///
/// Counts bytes outside strings and `//` comments, in one pass: brackets for
/// the nesting (never reset, so that unclosed brackets count too), and every
/// operator character, bracket, comma and operator keyword up to each `;`
/// for the size. Both are upper bounds on what Cedar's parser recurses over.
fn measure(block: &Block<'_>) -> Result<usize, Problem> {
    let b = block.text.as_bytes();
    let (mut i, mut depth, mut operators, mut statement) = (0, 0usize, 0usize, 0);
    let mut total = 0usize;
    let at = |start: usize, end: usize, message: String| {
        let (start, end) = if block.generated {
            (0, 0)
        } else {
            (start, end)
        };
        Err(Problem {
            start: block.offset + start,
            end: block.offset + end,
            message,
        })
    };
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                operators += 1;
                if depth > MAX_NESTING {
                    return at(
                        i,
                        i + 1,
                        format!(
                            "brackets nest deeper than {MAX_NESTING} levels here, more than Cedar's parser can take: split the condition"
                        ),
                    );
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'.' | b'+' | b'-' | b'*' | b'<' | b'>' | b'=' | b'!' | b'&' | b'|' | b',' => {
                operators += 1
            }
            b';' => {
                total += operators;
                operators = 0;
                statement = i + 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if matches!(&b[start..i], b"if" | b"in" | b"has" | b"like" | b"is") {
                    operators += 1;
                }
                i -= 1;
            }
            _ => {}
        }
        if operators > MAX_OPERATORS {
            let end = (i + 1).min(b.len());
            return at(
                skip_trivia(block.text, statement).min(end),
                end,
                format!(
                    "this policy has more than {MAX_OPERATORS} operators, more than Cedar's parser can take: split it into several policies"
                ),
            );
        }
        i += 1;
    }
    Ok(total + operators)
}

/// A parse error as a problem: at its first label, else the whole block.
fn parse_problem(e: &cedar_policy::ParseError, block: &Block<'_>) -> Problem {
    let detail = cedar_policy::ffi::DetailedError::from(e);
    let mut message = one_line(&detail.message);
    let first = detail.source_locations.first();
    if let Some(label) = first.and_then(|l| l.label.as_deref()) {
        let _ = write!(message, ": {}", one_line(label));
    }
    if let Some(help) = &detail.help {
        let _ = write!(message, "; {}", one_line(help));
    }
    let len = block.text.len();
    let (start, end) = match first {
        _ if block.generated => (0, 0),
        Some(l) => (
            l.loc.start.min(len),
            l.loc.end.clamp(l.loc.start.min(len), len),
        ),
        None => (0, len),
    };
    Problem {
        start: block.offset + start,
        end: block.offset + end,
        message,
    }
}

fn template_message(t: &Template) -> String {
    let slots: Vec<String> = t.slots().map(|s| format!("`{s}`")).collect();
    format!(
        "templates are not supported in an Agentfile: this policy has {}; name the entity instead (`principal == AgentRC::Agent::\"…\"`)",
        slots.join(" and ")
    )
}

/// What is wrong with a policy's entities and actions: types outside the
/// `AgentRC` namespace, actions not in [`ACTIONS`]. Empty when nothing is.
fn check(policy: &Policy) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut note = |m: String| {
        if !wrong.contains(&m) {
            wrong.push(m);
        }
    };
    let types = match policy.principal_constraint() {
        PrincipalConstraint::Is(t) | PrincipalConstraint::IsIn(t, _) => Some(t),
        _ => None,
    }
    .into_iter()
    .chain(match policy.resource_constraint() {
        ResourceConstraint::Is(t) | ResourceConstraint::IsIn(t, _) => Some(t),
        _ => None,
    });
    for t in types {
        if !in_namespace(&t) {
            note(outside(&t.to_string()));
        }
    }
    let actions = match policy.action_constraint() {
        ActionConstraint::Any => Vec::new(),
        ActionConstraint::Eq(u) => vec![u],
        ActionConstraint::In(us) => us,
    };
    for u in &actions {
        // Types outside the namespace are reported with the literals below.
        if in_namespace(u.type_name()) && !is_action_type(u.type_name()) {
            note(format!(
                "`{u}` is not an action: actions are `{NAMESPACE}::Action::\"…\"`"
            ));
        }
    }
    // Literals anywhere in the policy: its scope and its conditions.
    for u in policy.entity_literals() {
        let t = u.type_name();
        if is_action_type(t) {
            let name = u.id().unescaped();
            if !ACTIONS.contains(&name) {
                note(unknown_action(name));
            }
        } else if !in_namespace(t) {
            if t.basename() == "Action" {
                note(format!(
                    "`{u}` is outside the {NAMESPACE} namespace: write `{NAMESPACE}::Action::\"{}\"`",
                    u.id().escaped()
                ));
            } else {
                note(outside(&u.to_string()));
            }
        }
    }
    wrong
}

fn outside(what: &str) -> String {
    format!(
        "`{what}` is outside the {NAMESPACE} namespace: Agentfile policies name `{NAMESPACE}::Agent`, `{NAMESPACE}::Action`, `{NAMESPACE}::Tool`, … entities"
    )
}

fn unknown_action(name: &str) -> String {
    let known: Vec<String> = ACTIONS
        .iter()
        .map(|a| match ALIASES.iter().find(|(alias, _)| alias == a) {
            Some((_, of)) => format!("{a} (= {of})"),
            None => (*a).to_owned(),
        })
        .collect();
    let guess = diag::suggest(name, ACTIONS.iter().copied())
        .map_or(String::new(), |s| format!(" (did you mean `{s}`?)"));
    format!(
        "unknown action `{name}`{guess}; the actions are {}",
        known.join(", ")
    )
}

fn in_namespace(t: &EntityTypeName) -> bool {
    t.namespace_components().next() == Some(NAMESPACE)
}

fn is_action_type(t: &EntityTypeName) -> bool {
    t.basename() == "Action" && t.namespace() == NAMESPACE
}

fn canonical_action(action: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == action)
        .map_or(action, |(_, of)| of)
}

/// Why a request cannot be put to Cedar (the decision's error and rule say
/// so); Cedar's messages on one line.
#[derive(Debug, thiserror::Error)]
enum Invalid {
    #[error("`{ns}::{0}` is not a Cedar entity type", ns = NAMESPACE)]
    EntityType(String),
    #[error("its context: {}", one_line(&.0.to_string()))]
    Context(Box<cedar_policy::ContextCreationError>),
    #[error("{}", one_line(&.0.to_string()))]
    Request(Box<cedar_policy::RequestValidationError>),
}

/// Why an aliased policy could not be rewritten (a problem at the policy);
/// Cedar's messages on one line.
#[derive(Debug, thiserror::Error)]
enum Rewrite {
    #[error("{}", one_line(&.0.to_string()))]
    ToJson(Box<cedar_policy::PolicyToJsonError>),
    #[error("{}", one_line(&.0.to_string()))]
    FromJson(Box<cedar_policy::PolicyFromJsonError>),
}

/// The policy under `id`, with every aliased action replaced by its action.
fn canonical(policy: &Policy, id: &PolicyId) -> Result<Policy, Rewrite> {
    let aliased = policy.entity_literals().iter().any(|u| {
        is_action_type(u.type_name()) && canonical_action(u.id().unescaped()) != u.id().unescaped()
    });
    if !aliased {
        return Ok(policy.new_id(id.clone()));
    }
    let mut json = policy.to_json().map_err(|e| Rewrite::ToJson(Box::new(e)))?;
    rename_actions(&mut json);
    Policy::from_json(Some(id.clone()), json).map_err(|e| Rewrite::FromJson(Box::new(e)))
}

/// Replace aliased actions in a policy's JSON form, wherever an entity
/// reference (`{"type": …, "id": …}`) names one.
fn rename_actions(json: &mut serde_json::Value) {
    match json {
        serde_json::Value::Object(map) => {
            let is_action =
                map.get("type").and_then(|t| t.as_str()) == Some(&format!("{NAMESPACE}::Action"));
            if is_action && let Some(serde_json::Value::String(id)) = map.get_mut("id") {
                let to = canonical_action(id);
                if to != id {
                    *id = to.to_owned();
                }
            }
            map.values_mut().for_each(rename_actions);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(rename_actions),
        _ => {}
    }
}

fn uids(
    agent: &str,
    action: &str,
    resource_type: &str,
    resource_id: &str,
) -> Result<(EntityUid, EntityUid, EntityUid), Invalid> {
    let uid = |ty: &str, id: &str| {
        EntityTypeName::from_str(&format!("{NAMESPACE}::{ty}"))
            .map(|t| EntityUid::from_type_name_and_id(t, EntityId::new(id)))
            .map_err(|_| Invalid::EntityType(ty.to_owned()))
    };
    Ok((
        uid("Agent", agent)?,
        uid("Action", canonical_action(action))?,
        uid(resource_type, resource_id)?,
    ))
}

fn value(key: &str, v: &str) -> RestrictedExpression {
    if NUMBER_KEYS.contains(&key)
        && let Ok(n) = v.parse::<i64>()
    {
        return RestrictedExpression::new_long(n);
    }
    RestrictedExpression::new_string(v.to_owned())
}

fn principal_matches(c: &PrincipalConstraint, u: &EntityUid) -> bool {
    match c {
        PrincipalConstraint::Any => true,
        PrincipalConstraint::Eq(e) | PrincipalConstraint::In(e) => e == u,
        PrincipalConstraint::Is(t) => t == u.type_name(),
        PrincipalConstraint::IsIn(t, e) => t == u.type_name() && e == u,
    }
}

fn resource_matches(c: &ResourceConstraint, u: &EntityUid) -> bool {
    match c {
        ResourceConstraint::Any => true,
        ResourceConstraint::Eq(e) | ResourceConstraint::In(e) => e == u,
        ResourceConstraint::Is(t) => t == u.type_name(),
        ResourceConstraint::IsIn(t, e) => t == u.type_name() && e == u,
    }
}

fn action_matches(c: &ActionConstraint, u: &EntityUid) -> bool {
    match c {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(e) => e == u,
        ActionConstraint::In(es) => es.contains(u),
    }
}

fn effect_word(e: Effect) -> &'static str {
    match e {
        Effect::Permit => "permit",
        Effect::Forbid => "forbid",
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A policy's text for a one-line quote: from its effect on (annotations
/// left out), whitespace collapsed, shortened.
fn excerpt(policy_text: &str) -> String {
    let body = skip_annotations(policy_text);
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    text::shorten(&flat, EXCERPT_CHARS)
}

/// `text` after its leading `@name` / `@name("…")` annotations (and the
/// blanks and comments around them).
fn skip_annotations(text: &str) -> &str {
    let mut i = skip_trivia(text, 0);
    while text.get(i..).is_some_and(|r| r.starts_with('@')) {
        i += 1;
        let rest = text.get(i..).unwrap_or("");
        i += rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        i = skip_trivia(text, i);
        if text.get(i..).is_some_and(|r| r.starts_with('(')) {
            i = skip_trivia(text, i + 1);
            if text.get(i..).is_some_and(|r| r.starts_with('"')) {
                i = after_string(text, i);
            }
            i = skip_trivia(text, i);
            if text.get(i..).is_some_and(|r| r.starts_with(')')) {
                i += 1;
            }
        }
        i = skip_trivia(text, i);
    }
    text.get(i..).unwrap_or(text)
}

/// The byte after the string literal that starts at `start` (a `"`).
fn after_string(text: &str, start: usize) -> usize {
    let mut escaped = false;
    for (k, c) in text.get(start + 1..).unwrap_or("").char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return start + 1 + k + 1,
            _ => {}
        }
    }
    text.len()
}

/// A message from the crate on one line, without miette's decorations.
fn one_line(s: &str) -> String {
    s.split_whitespace()
        .filter(|w| !matches!(*w, "×" | "│" | "╰─▶" | "├─▶"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole Agentfile and its one POLICY block, as the front end finds it.
    fn file_block(file: &str) -> Block<'_> {
        let open = file.find("POLICY\n").expect("a POLICY line") + "POLICY\n".len();
        let close = file[open..].find("END").expect("an END line") + open;
        Block {
            text: &file[open..close],
            offset: open,
            line: 1 + count_lines(&file[..open]),
            generated: false,
        }
    }

    fn parse(text: &str) -> Result<Policies, Vec<Problem>> {
        Policies::parse(&[Block {
            text,
            offset: 0,
            line: 1,
            generated: false,
        }])
    }

    fn policies(text: &str) -> Policies {
        match parse(text) {
            Ok(p) => p,
            Err(problems) => panic!("{problems:#?}"),
        }
    }

    fn problems_in(text: &str) -> Vec<Problem> {
        match parse(text) {
            Ok(p) => panic!("parsed {} policies, expected problems", p.len()),
            Err(problems) => problems,
        }
    }

    const EXAMPLE: &str = "AGENT hello-local\n\
        TOOL utcp:file_read\n\
        POLICY\n\
        \x20 permit(\n\
        \x20   principal == AgentRC::Agent::\"hello-local\",\n\
        \x20   action == AgentRC::Action::\"tool.invoke\",\n\
        \x20   resource == AgentRC::Tool::\"file_read\"\n\
        \x20 );\n\
        \x20 forbid(\n\
        \x20   principal,\n\
        \x20   action == AgentRC::Action::\"filesystem.write\",\n\
        \x20   resource\n\
        \x20 ) when { context.path like \"/workspace/secret/*\" };\n\
        END\n";

    #[test]
    fn a_matching_permit_allows() {
        let p = Policies::parse(&[file_block(EXAMPLE)]).expect("parses");
        assert_eq!(p.len(), 2);
        let d = p.authorize(
            "hello-local",
            "tool.invoke",
            "Tool",
            "file_read",
            &[("tool", "file_read")],
        );
        assert!(d.allowed, "{d:?}");
        assert_eq!(d.policies, ["policy at line 4"]);
        assert!(d.errors.is_empty());
        assert_eq!(
            d.rule(),
            "cedar: permit policy at line 4 (permit( principal == AgentRC::Agent::\"hello-local\", action =…)"
        );
    }

    #[test]
    fn nothing_permits_means_denied() {
        let p = Policies::parse(&[file_block(EXAMPLE)]).expect("parses");
        for (agent, action, tool) in [
            ("other", "tool.invoke", "file_read"),
            ("hello-local", "tool.invoke", "file_write"),
            ("hello-local", "filesystem.read", "file_read"),
        ] {
            let d = p.authorize(agent, action, "Tool", tool, &[]);
            assert!(!d.allowed, "{agent} {action} {tool}");
            assert!(d.policies.is_empty());
            assert_eq!(d.rule(), "cedar: no policy permits it (deny by default)");
        }
    }

    #[test]
    fn a_matching_forbid_overrides_permits() {
        let p = policies(
            "permit(principal, action, resource);\n\
             @id(\"no-secrets\")\n\
             forbid(principal, action == AgentRC::Action::\"filesystem.write\", resource)\n\
             \x20 when { context.path like \"/workspace/secret/*\" };\n",
        );
        let write = |path| p.authorize("a", "filesystem.write", "Tool", "write", &[("path", path)]);
        let d = write("/workspace/secret/key.pem");
        assert!(!d.allowed);
        assert_eq!(d.policies, ["no-secrets"]);
        assert_eq!(
            d.rule(),
            "cedar: forbid no-secrets (forbid(principal, action == AgentRC::Action::\"filesystem.wri…)"
        );
        let d = write("/workspace/notes.md");
        assert!(d.allowed);
        assert_eq!(d.policies, ["policy at line 1"]);
        // Cedar's `like`: `*` spans `/` too; the rest is literal.
        assert!(!write("/workspace/secret/a/b").allowed);
        assert!(write("/workspace/secrets").allowed);
    }

    #[test]
    fn the_context_holds_strings_and_a_numeric_port() {
        let p = policies(
            "permit(principal, action == AgentRC::Action::\"network.connect\", resource)\n\
             \x20 when { context.host like \"*.example.com\" && context.port == 443 };\n",
        );
        let connect = |host, port| {
            p.authorize(
                "a",
                "network.connect",
                "Tool",
                "web_fetch",
                &[("host", host), ("port", port)],
            )
        };
        assert!(connect("api.example.com", "443").allowed);
        assert!(!connect("api.example.com", "80").allowed);
        assert!(!connect("example.org", "443").allowed);
        // A missing attribute is an error: Cedar skips the policy, we say so.
        let d = p.authorize(
            "a",
            "network.connect",
            "Tool",
            "web_fetch",
            &[("host", "x.example.com")],
        );
        assert!(!d.allowed);
        assert_eq!(d.errors.len(), 1, "{d:?}");
        assert!(
            d.errors[0].starts_with("policy at line 1 was skipped: ")
                && d.errors[0].contains("`port`"),
            "{:?}",
            d.errors
        );
        assert_eq!(
            d.rule(),
            "cedar: no policy permits it (deny by default; 1 policy skipped on an error)"
        );
    }

    #[test]
    fn the_egress_alias_means_connect() {
        let p = policies(
            "permit(principal, action == AgentRC::Action::\"network.egress\", resource)\n\
             \x20 when { action == AgentRC::Action::\"network.egress\" };\n",
        );
        assert!(
            p.authorize("a", "network.connect", "Tool", "web_fetch", &[])
                .allowed
        );
        assert!(
            p.authorize("a", "network.egress", "Tool", "web_fetch", &[])
                .allowed
        );
        assert!(p.permits_name("network.connect"));
        assert!(p.permits_name("network.egress"));
        assert!(!p.permits_name("filesystem.read"));
    }

    #[test]
    fn a_default_permit_still_yields_to_forbids() {
        let p = policies(
            "permit(principal, action == AgentRC::Action::\"tool.invoke\", resource);\n\
             forbid(principal, action == AgentRC::Action::\"filesystem.read\", resource)\n\
             \x20 when { context.path like \"/etc/*\" };\n",
        );
        assert!(!p.permits_name("filesystem.read"));
        let read = |path| {
            p.authorize_with_default_permit(
                "a",
                "filesystem.read",
                "Tool",
                "read",
                &[("path", path)],
            )
        };
        let d = read("/workspace/a");
        assert!(d.allowed);
        assert_eq!(d.policies, ["default permit of filesystem.read"]);
        let d = read("/etc/passwd");
        assert!(!d.allowed);
        assert_eq!(d.policies, ["policy at line 2"]);
        // Without the default permit nothing permits the read.
        assert!(
            !p.authorize(
                "a",
                "filesystem.read",
                "Tool",
                "read",
                &[("path", "/workspace/a")]
            )
            .allowed
        );
    }

    #[test]
    fn could_permit_looks_at_scopes_only() {
        let p = policies(
            "permit(principal == AgentRC::Agent::\"a\", action in [AgentRC::Action::\"tool.invoke\"], resource is AgentRC::Tool)\n\
             \x20 when { context.tool == \"never\" };\n\
             permit(principal, action == AgentRC::Action::\"tool.invoke\", resource == AgentRC::Tool::\"grep\");\n\
             forbid(principal, action, resource);\n",
        );
        assert!(p.could_permit("a", "tool.invoke", "Tool", "read"));
        assert!(!p.could_permit("b", "tool.invoke", "Tool", "read"));
        assert!(p.could_permit("b", "tool.invoke", "Tool", "grep"));
        assert!(!p.could_permit("a", "filesystem.read", "Tool", "read"));
        assert!(!p.could_permit("a", "tool.invoke", "Server", "read"));
    }

    #[test]
    fn in_works_for_the_entity_itself() {
        let p = policies(
            "permit(principal in AgentRC::Agent::\"a\", action in AgentRC::Action::\"tool.invoke\", resource);",
        );
        assert!(p.authorize("a", "tool.invoke", "Tool", "x", &[]).allowed);
        assert!(!p.authorize("b", "tool.invoke", "Tool", "x", &[]).allowed);
    }

    #[test]
    fn no_blocks_means_no_policies_and_every_request_denied() {
        let p = Policies::parse(&[]).expect("parses");
        assert_eq!(p.len(), 0);
        assert!(p.is_empty());
        let d = p.authorize("a", "tool.invoke", "Tool", "read", &[]);
        assert!(!d.allowed);
        assert!(d.policies.is_empty() && d.errors.is_empty());
        // A block of comments only has no policies either.
        assert!(policies("// nothing yet\n\n").is_empty());
    }

    #[test]
    fn a_parse_error_lands_on_its_byte_of_the_file() {
        // The block starts at file offset 46 (line 5); its third line has
        // the error: `actoin` where `action` belongs.
        let file = "AGENT a\nTOOL utcp:file_read\n# 10 bytes\nPOLICY\n\
                    permit(principal, action, resource);\n\
                    \n\
                    forbid(principal, actoin, resource);\n\
                    END\n";
        let block = file_block(file);
        assert_eq!((block.offset, block.line), (46, 5));
        let problems = Policies::parse(&[block]).expect_err("actoin");
        assert_eq!(problems.len(), 1, "{problems:?}");
        let p = &problems[0];
        let at = file.find("actoin").expect("in the file");
        assert_eq!((p.start, p.end), (at, at + "actoin".len()));
        assert_eq!(
            p.message,
            "found an invalid variable in the policy scope: actoin; policy scopes must contain a `principal`, `action`, and `resource` element in that order"
        );
        // Line and column as an editor counts them: line 7, column 19.
        let line_start = file[..p.start].rfind('\n').map_or(0, |i| i + 1);
        assert_eq!(1 + count_lines(&file[..p.start]), 7);
        assert_eq!(p.start - line_start + 1, 19);
    }

    #[test]
    fn a_parse_error_message_is_one_plain_line() {
        let problems = problems_in("permit(principal, action, resource) when { context.x == };");
        assert_eq!(problems.len(), 1);
        let p = &problems[0];
        assert_eq!(
            p.start,
            "permit(principal, action, resource) when { context.x == ".len()
        );
        assert_eq!(p.end, p.start + 1);
        assert!(
            p.message
                .starts_with("unexpected token `}`: expected `!`, `(`"),
            "{}",
            p.message
        );
        assert!(!p.message.contains('\n') && !p.message.contains('×'));
    }

    #[test]
    fn each_block_is_parsed_with_its_own_offsets() {
        let file = "POLICY\npermit(principal, action, resource);\nEND\nPOLICY\n  permit(principal, action, resource) when { 1 + };\nEND\n";
        let second = file.rfind("POLICY\n").expect("two blocks") + "POLICY\n".len();
        let blocks = [
            file_block(file),
            Block {
                text: &file[second..file.rfind("END").expect("END")],
                offset: second,
                line: 5,
                generated: false,
            },
        ];
        let problems = Policies::parse(&blocks).expect_err("1 +");
        assert_eq!(problems.len(), 1);
        assert_eq!(&file[problems[0].start..problems[0].end], "}");
    }

    #[test]
    fn policies_are_named_by_line_unless_they_have_an_id() {
        let file = "AGENT a\n\nPOLICY\n\
                    // reads\n\
                    permit(principal, action == AgentRC::Action::\"filesystem.read\", resource);\n\
                    @id(\"writes\") permit(principal, action == AgentRC::Action::\"filesystem.write\", resource);\n\
                    permit(principal, action == AgentRC::Action::\"tool.invoke\", resource); permit(principal, action == AgentRC::Action::\"mcp.request\", resource);\n\
                    END\n";
        let p = Policies::parse(&[file_block(file)]).expect("parses");
        assert_eq!(p.len(), 4);
        let decided = |action| p.authorize("a", action, "Tool", "t", &[]).policies;
        assert_eq!(decided("filesystem.read"), ["policy at line 5"]);
        assert_eq!(decided("filesystem.write"), ["writes"]);
        assert_eq!(decided("tool.invoke"), ["policy at line 7"]);
        assert_eq!(decided("mcp.request"), ["policy 2 at line 7"]);
    }

    #[test]
    fn ids_are_unique_across_blocks() {
        let file = "POLICY\n@id(\"x\") permit(principal, action, resource);\nEND\nPOLICY\n@id(\"x\") forbid(principal, action, resource);\nEND\n";
        let second = file.rfind("POLICY\n").expect("two blocks") + "POLICY\n".len();
        let blocks = [
            file_block(file),
            Block {
                text: &file[second..file.rfind("END").expect("END")],
                offset: second,
                line: 5,
                generated: false,
            },
        ];
        let problems = Policies::parse(&blocks).expect_err("duplicate id");
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].message,
            "duplicate policy id `x`: the policy at line 2 has it already"
        );
        assert_eq!(problems[0].start, second);
        assert!(file[problems[0].start..problems[0].end].ends_with("resource);"));
        assert_eq!(
            problems_in("@id(\" \") permit(principal, action, resource);")[0].message,
            "`@id` must not be empty"
        );
    }

    #[test]
    fn an_unknown_action_is_a_problem_at_its_policy() {
        let text = "permit(principal, action, resource);\n\
                    \x20 permit(principal, action == AgentRC::Action::\"tool.invok\", resource);\n";
        let problems = problems_in(text);
        assert_eq!(problems.len(), 1);
        let p = &problems[0];
        assert_eq!(
            &text[p.start..p.end],
            "permit(principal, action == AgentRC::Action::\"tool.invok\", resource);"
        );
        assert_eq!(
            p.message,
            "unknown action `tool.invok` (did you mean `tool.invoke`?); the actions are tool.invoke, filesystem.read, filesystem.write, network.connect, network.egress (= network.connect), cred.resolve, function.invoke, mcp.request, agent.delegate"
        );
        // No suggestion when nothing is close; in conditions too.
        let problems = problems_in(
            "permit(principal, action, resource) when { action == AgentRC::Action::\"launch\" };",
        );
        assert!(
            problems[0]
                .message
                .starts_with("unknown action `launch`; the actions are tool.invoke,"),
            "{}",
            problems[0].message
        );
    }

    #[test]
    fn types_outside_the_namespace_are_problems() {
        let cases = [
            (
                "permit(principal == User::\"a\", action, resource);",
                "`User::\"a\"` is outside the AgentRC namespace",
            ),
            (
                "permit(principal, action == Action::\"tool.invoke\", resource);",
                "`Action::\"tool.invoke\"` is outside the AgentRC namespace: write `AgentRC::Action::\"tool.invoke\"`",
            ),
            (
                "permit(principal, action, resource is Files::Tool);",
                "`Files::Tool` is outside the AgentRC namespace",
            ),
            (
                "permit(principal, action == AgentRC::Sub::Action::\"x\", resource);",
                "`AgentRC::Sub::Action::\"x\"` is not an action",
            ),
            (
                "permit(principal, action, resource) when { resource == Other::\"x\" };",
                "`Other::\"x\"` is outside the AgentRC namespace",
            ),
        ];
        for (text, want) in cases {
            let problems = problems_in(text);
            assert_eq!(problems.len(), 1, "{text}: {problems:?}");
            assert!(
                problems[0].message.starts_with(want),
                "{text}: {}",
                problems[0].message
            );
            assert_eq!((problems[0].start, problems[0].end), (0, text.len()));
        }
        // Deeper AgentRC namespaces are still AgentRC's.
        assert_eq!(
            policies("permit(principal, action, resource is AgentRC::Mcp::Server);").len(),
            1
        );
    }

    #[test]
    fn templates_are_problems() {
        let text = "permit(principal == ?principal, action, resource);";
        let problems = problems_in(text);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].message.starts_with(
                "templates are not supported in an Agentfile: this policy has `?principal`"
            ),
            "{}",
            problems[0].message
        );
        assert_eq!((problems[0].start, problems[0].end), (0, text.len()));
    }

    #[test]
    fn problems_in_generated_blocks_point_at_the_directive() {
        let problems = Policies::parse(&[Block {
            text: "@id(\"ALLOW on line 3\")\npermit(principal, action == AgentRC::Action::\"filesystem.wirte\", resource);\n",
            offset: 30,
            line: 3,
            generated: true,
        }])
        .expect_err("wirte");
        assert_eq!((problems[0].start, problems[0].end), (30, 30));
        assert!(
            problems[0]
                .message
                .contains("did you mean `filesystem.write`?")
        );
    }

    #[test]
    fn a_bad_request_is_denied_with_a_reason() {
        let p = policies("permit(principal, action, resource);");
        let d = p.authorize("a", "tool.invoke", "not a type", "x", &[]);
        assert!(!d.allowed);
        assert_eq!(
            d.errors,
            ["`AgentRC::not a type` is not a Cedar entity type"]
        );
        let d = p.authorize(
            "a",
            "tool.invoke",
            "Tool",
            "x",
            &[("path", "a"), ("path", "b")],
        );
        assert!(!d.allowed);
        assert!(d.errors[0].starts_with("its context: "), "{:?}", d.errors);
    }

    #[test]
    fn the_excerpt_skips_annotations_and_comments() {
        assert_eq!(
            excerpt("@id(\"a)\\\"\") // c\n @reason\n\tforbid(\n  principal,\n action, resource);"),
            "forbid( principal, action, resource);"
        );
    }

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn garbage_never_panics() {
        const PIECES: &[&str] = &[
            "permit",
            "forbid",
            "(",
            ")",
            "principal",
            "action",
            "resource",
            "==",
            "in",
            "is",
            ",",
            ";",
            "when",
            "unless",
            "{",
            "}",
            "context",
            ".",
            "path",
            "like",
            "\"",
            "\"/w/*\"",
            "AgentRC",
            "::",
            "Action",
            "\"tool.invoke\"",
            "Tool",
            "?principal",
            "?resource",
            "@id",
            "@",
            "[",
            "]",
            "&&",
            "||",
            "!",
            "if",
            "then",
            "else",
            "has",
            "1",
            "-9223372036854775808",
            "ip(\"1.2.3.4\")",
            "//",
            "\n",
            " ",
            "\\",
            "é",
            "\u{0}",
            "🦀",
            "*",
            "_",
            "-",
            "+",
            "<",
            ">=",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut parsed = 0;
        for round in 0..400 {
            let text: String = if round % 2 == 0 {
                // Tokens in random order: mostly wrong, sometimes not.
                (0..rng.below(40))
                    .map(|_| PIECES[rng.below(PIECES.len())])
                    .collect()
            } else {
                // A valid file with a few bytes changed.
                let mut chars: Vec<char> = EXAMPLE.chars().collect();
                for _ in 0..=rng.below(4) {
                    let at = rng.below(chars.len());
                    match rng.below(3) {
                        0 => {
                            chars.remove(at);
                        }
                        1 => chars.insert(
                            at,
                            PIECES[rng.below(PIECES.len())]
                                .chars()
                                .next()
                                .unwrap_or(' '),
                        ),
                        _ => {
                            let other = rng.below(chars.len());
                            chars.swap(at, other);
                        }
                    }
                }
                chars.into_iter().collect()
            };
            let offset = rng.below(1000);
            let block = Block {
                text: &text,
                offset,
                line: 1,
                generated: round % 7 == 0,
            };
            match Policies::parse(&[block, block]) {
                Ok(p) => {
                    parsed += 1;
                    let d = p.authorize("a", "tool.invoke", "Tool", "t", &[("path", "/w/x")]);
                    let _ = (d.rule(), p.could_permit("a", "tool.invoke", "Tool", "t"));
                }
                Err(problems) => {
                    for p in problems {
                        assert!(
                            p.start <= p.end && p.end <= offset + text.len(),
                            "{p:?} in {text:?}"
                        );
                        assert!(!p.message.is_empty() && !p.message.contains('\n'), "{p:?}");
                    }
                }
            }
        }
        assert!(parsed > 0, "some inputs should still parse");
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_fails_cleanly(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }
    }

    #[test]
    fn a_megabyte_block_finishes() {
        let policy = "permit(principal == AgentRC::Agent::\"a\", action == AgentRC::Action::\"tool.invoke\", resource) when { context.path like \"/workspace/*\" };\n";
        let text = policy.repeat((1 << 20) / policy.len() + 1);
        let p = policies(&text);
        assert_eq!(p.len(), text.lines().count());
        assert!(
            p.authorize("a", "tool.invoke", "Tool", "t", &[("path", "/workspace/x")])
                .allowed
        );
        // Garbage of the same size fails.
        let open = format!(
            "permit(principal, action, resource) when {{ {} }};",
            "(".repeat(1 << 20)
        );
        assert!(parse(&open).is_err());
        assert!(parse(&"@".repeat(1 << 20)).is_err());
        assert!(parse(&"\"".repeat(1 << 20)).is_err());
    }

    #[test]
    fn nesting_too_deep_for_the_parser_is_a_problem() {
        // 100 levels overflow a 2 MiB stack inside Cedar's parser.
        let text = format!(
            "permit(principal, action, resource) when {{ {}true{} }};",
            "(".repeat(100),
            ")".repeat(100)
        );
        let problems = problems_in(&text);
        assert_eq!(problems.len(), 1);
        // The 33rd open bracket: `{` is the first, `permit(` is closed.
        let at = "permit(principal, action, resource) when { ".len() + 31;
        assert_eq!((problems[0].start, problems[0].end), (at, at + 1));
        assert!(
            problems[0]
                .message
                .starts_with("brackets nest deeper than 32 levels")
        );
        // Brackets in strings and comments do not count.
        let quiet = format!(
            "// {}\npermit(principal, action, resource) when {{ context.path like \"{}\" }};",
            "(".repeat(100),
            "[".repeat(100)
        );
        assert_eq!(policies(&quiet).len(), 1);
        // 32 levels are fine.
        let fine = format!(
            "permit(principal, action, resource) when {{ {}true{} }};",
            "(".repeat(30),
            ")".repeat(30)
        );
        assert_eq!(policies(&fine).len(), 1);
    }

    #[test]
    fn policies_too_long_for_the_parser_are_problems() {
        let chain = |n: usize| {
            format!(
                "permit(principal, action, resource) when {{ 1{} == {} }};",
                "+1".repeat(n),
                n + 1
            )
        };
        let problems = problems_in(&format!(
            "permit(principal, action, resource);\n{}",
            chain(3000)
        ));
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].start,
            "permit(principal, action, resource);\n".len()
        );
        assert!(
            problems[0]
                .message
                .starts_with("this policy has more than 2048 operators")
        );
        // Just under the limit: parsed, decided and dropped on a thread with
        // the stack a tokio worker has.
        let p = policies(&chain(2000));
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let d = p.authorize("a", "tool.invoke", "Tool", "t", &[]);
                assert!(d.allowed || !d.errors.is_empty(), "{d:?}");
                drop(p);
            })
            .expect("a thread")
            .join()
            .expect("no overflow");
        // The count starts again at each policy.
        let many = format!("{}\n", chain(1000)).repeat(10);
        assert_eq!(policies(&many).len(), 10);
    }

    #[test]
    fn a_file_holds_a_bounded_number_of_policies_and_operators() {
        let one = "permit(principal, action, resource);\n";
        assert_eq!(policies(&one.repeat(MAX_POLICIES)).len(), MAX_POLICIES);
        let problems = problems_in(&one.repeat(MAX_POLICIES + 1));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].message.starts_with("more than 10000 policies"),
            "{problems:?}"
        );
        // The last policy, where the count passed the bound.
        assert_eq!(problems[0].start, one.len() * MAX_POLICIES);

        let long = format!(
            "permit(principal, action, resource) when {{ [{}] == [] }};\n",
            vec!["1"; 2000].join(",")
        );
        let n = MAX_FILE_OPERATORS / 2000 + 1;
        let problems = problems_in(&long.repeat(n));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].message.contains("operators together"),
            "{problems:?}"
        );
    }

    #[test]
    fn statements_are_parsed_one_by_one_at_their_lines() {
        let text = "// a; comment\npermit(principal, action, resource)\n  when { context.path == \"a;b\" };\n\nforbid(principal, action, resource) when { context.path == \"x\" };\n// trailing\n";
        let p = policies(text);
        assert_eq!(p.len(), 2);
        let d = p.authorize("a", "tool.invoke", "Tool", "t", &[("path", "x")]);
        assert!(!d.allowed);
        assert!(d.rule().contains("line 5"), "{}", d.rule());
        // A problem in the second statement is at its place in the block.
        let problems = problems_in(
            "permit(principal, action, resource);\npermit(principal, action, resourc);\n",
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].start >= "permit(principal, action, resource);\n".len());
    }
}
