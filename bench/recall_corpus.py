"""The recall benchmark's data: long, multi-session conversations and labelled questions,
generated from a fixed seed (the same rows and questions on every vendor and every run).

How it is built (see bench_recall for how it is scored):
- 60 "threads", each a person's project or plan (a trip, a move, a migration…), told over
  1–4 separate conversations weeks apart; 240+ conversations in all, each 40–80 messages.
- A conversation is mostly small talk and work chatter drawn from a shared vocabulary and
  from other threads' names (people, places, tools recur across threads, so a name alone
  rarely identifies a conversation), with 1–3 *facts* of its thread planted at random
  positions, said by the user or the assistant. Titles look like the app's auto-titles
  (2–4 words from the thread's subject), as a person would have them.
- Questions ask for a fact in other words than it was stated. Each fact template carries
  its own question wordings, written to be what a person would ask, and each question is
  labelled with the conversations holding the fact (several for facts that were revisited:
  "all@3" needs every one of them):
  - `paraphrase`: synonyms for the verb/noun ("reserved" for "booked");
  - `morphology`: another form of a key word ("camping" for "camped", "tram" for "trams");
  - `exact`: the fact's own key words;
  - `typo`: one of the above with one content word misspelt (a dropped, doubled or swapped
    letter);
  - `chinese`: Chinese threads, asked in Chinese or in Chinese mixed with English names.
- The templates were written once, before any ranking was measured, and not changed to
  favour one system: verbs and nouns are varied the way people vary them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SEED = 16_2026

PEOPLE = """Maria Tomas Aiko Priya Lukas Ines Omar Chloe Dmitri Sofia Kenji Amara Jonas
Leila Mateo Hannah Ravi Nadia Felix Greta Tariq Elena Bruno Yara Oskar Mina Pablo Noor
Ivan Clara""".split()
PLACES = """Lisbon Porto Kyoto Oslo Vienna Seville Tallinn Krakow Dublin Bergen Lyon Naples
Ghent Bologna Zermatt Galway Riga Hanoi Cusco Hobart Tromso Valencia Granada Split""".split()
TOOLS = """Postgres Redis Kafka Nginx Terraform Grafana Sentry Airflow Celery Kubernetes
Elastic Prometheus""".split()
FILLER_NOUNS = """file config ticket draft plan budget meeting email report invoice backup
photo recipe schedule list message page chart note budget idea doc branch test build
release review form table estimate flight hotel dinner garden laptop battery""".split()
FILLER = [
    "Sounds good, let me check the {n} first.",
    "Can you look at the {n} again? Something about it feels off.",
    "I updated the {n} this morning, {p} had a few comments.",
    "Not sure yet. Maybe we talk about the {n} tomorrow.",
    "Here's a cleaner version of the {n} with the changes you asked for.",
    "Thanks! That {n} looks much better now.",
    "Quick question about the {n}: should it go to {p} or stay with us?",
    "I'll send the {n} to {p} after lunch.",
    "Remember to back up the {n} before you change anything.",
    "The {n} from last week is still in the shared folder.",
    "{p} mentioned {l} again, but that's a different story.",
    "Let's keep the {n} short, two pages at most.",
    "Good point. I'll add that to the {n} and the {n2}.",
    "It works on my laptop but the {n} on the server is older.",
    "Could you summarise the {n} in three bullet points?",
    "**Summary**\n- the {n} is done\n- the {n2} needs a review\n- ask {p} about {t}",
    "We also tried {t} for the {n}, it was fine.",
    "Ok, moving on. What about the {n2}?",
]
ZH_FILLER = [
    "好的，我先看一下{n}。",
    "{p}说{n}还需要再改一下。",
    "明天我们再讨论这个{n}吧。",
    "谢谢，这个{n}现在好多了。",
    "我把{n}发给{p}了，等他回复。",
    "记得先备份{n}再改。",
]
ZH_NOUNS = "文件 配置 报告 预算 会议 邮件 计划 表格 草稿 笔记 发票 照片".split()


@dataclass(frozen=True)
class Template:
    """A fact as first stated, how it is revisited, and the questions that ask for it.

    Slots: {p} person, {l} place, {t} tool, {d} a day; every question is (kind, text)."""

    subject: str  # the thread's title
    fact: str
    followup: str
    questions: tuple[tuple[str, str], ...]
    chinese: bool = False


TEMPLATES = [
    Template(
        "Camping trip {l}",
        "We camped near {l} with {p} for three nights, the lake site was perfect.",
        "Booked the same lakeside campsite near {l} again for August.",
        (
            ("morphology", "where did we go camping with {p}"),
            ("paraphrase", "that lake where {p} and I pitched the tent"),
            ("exact", "camped lake {l} {p}"),
        ),
    ),
    Template(
        "{l} trams",
        "The old trams in {l} run every twelve minutes; line 28 goes up to the castle.",
        "Tram 28 in {l} was packed, next time take the early tram.",
        (
            ("morphology", "which tram goes to the castle in {l}"),
            ("paraphrase", "streetcar line up the hill {l}"),
            ("exact", "trams {l} castle line"),
        ),
    ),
    Template(
        "Moving flat with {p}",
        "{p} is moving to a new flat on the 14th, I promised to help carry boxes.",
        "The move went fine, {p} still owes me a dinner for carrying the boxes.",
        (
            ("morphology", "when was {p} moved into the new apartment"),
            ("paraphrase", "help {p} relocate apartment date"),
            ("exact", "{p} moving flat boxes"),
        ),
    ),
    Template(
        "{t} migration plan",
        "We decided to migrate the billing service to {t} after the audit in March.",
        "The {t} migration is done, billing runs on it since Tuesday.",
        (
            ("morphology", "what did we decide about migrating billing to {t}"),
            ("paraphrase", "move billing onto {t} decision"),
            ("exact", "migrate billing {t} audit"),
        ),
    ),
    Template(
        "{t} outage postmortem",
        "The {t} cluster crashed because the disk filled up; we added an alert at 80%.",
        "Another {t} disk alert fired last night, the alert threshold works.",
        (
            ("morphology", "why did {t} crash and what alerting did we add"),
            ("paraphrase", "{t} went down storage full"),
            ("exact", "{t} crashed disk alert"),
        ),
    ),
    Template(
        "Birthday gift for {p}",
        "For {p}'s birthday I ordered a ceramic teapot from the market in {l}.",
        "The teapot for {p} arrived, wrapped it already.",
        (
            ("morphology", "what present did I order for {p}'s birthdays"),
            ("paraphrase", "gift idea for {p} pottery"),
            ("exact", "{p} birthday teapot"),
        ),
    ),
    Template(
        "Running training",
        "My running plan: intervals on Tuesday, a long run on Sunday, rest on Friday.",
        "Ran the long run on Sunday, 18 km, knees felt fine.",
        (
            ("morphology", "what runs did I plan each week"),
            ("paraphrase", "jogging schedule long distance Sunday"),
            ("exact", "running plan intervals long run"),
        ),
    ),
    Template(
        "Hotel in {l}",
        "I booked a hotel in {l} near the station for the conference with {p}.",
        "Cancelled the {l} hotel booking, {p} found a cheaper apartment.",
        (
            ("morphology", "which hotel booking did I make in {l}"),
            ("paraphrase", "where am I staying in {l} for the conference"),
            ("exact", "booked hotel {l} conference"),
        ),
    ),
    Template(
        "Sourdough recipe",
        "The sourdough needs 75% hydration and an overnight proof in the fridge.",
        "Baked the sourdough again, the overnight proofing made a big difference.",
        (
            ("morphology", "how long should sourdough be proofed"),
            ("paraphrase", "bread dough water ratio fridge overnight"),
            ("exact", "sourdough hydration proof"),
        ),
    ),
    Template(
        "Guitar lessons with {p}",
        "{p} teaches me guitar on Thursdays; we are practising barre chords.",
        "Finally played the barre chord cleanly in {p}'s lesson.",
        (
            ("morphology", "who is teaching me guitar and which chord did we practise"),
            ("paraphrase", "my music lessons teacher {p}"),
            ("exact", "{p} guitar barre chords"),
        ),
    ),
    Template(
        "{t} upgrade",
        "Upgrading {t} to the new major version broke the dashboards; we pinned the old one.",
        "Tried the {t} upgrade again with the patched dashboards, it works now.",
        (
            ("morphology", "what broke when we upgraded {t}"),
            ("paraphrase", "{t} new version problems charts"),
            ("exact", "upgrading {t} dashboards pinned"),
        ),
    ),
    Template(
        "Flight to {l}",
        "My flight to {l} leaves at 7:40 from terminal 2, seat 14A.",
        "The {l} flight was delayed two hours, landed after midnight.",
        (
            ("morphology", "when do I fly to {l}"),
            ("paraphrase", "departure time plane {l} terminal"),
            ("exact", "flight {l} terminal seat"),
        ),
    ),
    Template(
        "Garden tomatoes",
        "The tomatoes in the garden got blight; I sprayed them with copper and cut the leaves.",
        "The garden tomato plants recovered from the blight, first harvest this week.",
        (
            ("morphology", "what did I do for the blighted tomato plants"),
            ("paraphrase", "vegetable disease treatment backyard"),
            ("exact", "tomatoes blight copper"),
        ),
    ),
    Template(
        "Invoice dispute with {p}",
        "{p}'s company disputes invoice 2231; they say the hours were billed twice.",
        "{p} paid invoice 2231 after we sent the corrected timesheet.",
        (
            ("morphology", "which invoices did {p} dispute"),
            ("paraphrase", "client says we double charged hours {p}"),
            ("exact", "{p} invoice 2231 disputes"),
        ),
    ),
    Template(
        "Learning Spanish",
        "I'm learning Spanish verbs with flashcards, irregular preterite is the hard part.",
        "Passed the Spanish quiz, the preterite flashcards helped.",
        (
            ("morphology", "how am I studying spanish verb"),
            ("paraphrase", "language practice cards past tense"),
            ("exact", "Spanish flashcards preterite"),
        ),
    ),
    Template(
        "{l} museum visit",
        "{p} and I visited the modern art museum in {l}; the rooftop cafe was the best part.",
        "Went back to the {l} museum rooftop with {p}, still great.",
        (
            ("morphology", "which museums did I visit with {p}"),
            ("paraphrase", "art gallery {l} roof coffee"),
            ("exact", "museum {l} rooftop {p}"),
        ),
    ),
    Template(
        "部署 {t}",
        "我们决定下周把{t}部署到生产环境，{p}负责回滚方案。",
        "{t}已经部署到生产环境，回滚方案没有用上。",
        (
            ("chinese", "{t} 部署 生产环境 回滚"),
            ("chinese", "谁负责 {t} 的回滚方案"),
        ),
        chinese=True,
    ),
    Template(
        "{l}旅行",
        "下个月和{p}去{l}旅行，酒店已经预订好了。",
        "{l}的酒店取消了，{p}找到了更便宜的民宿。",
        (
            ("chinese", "和{p}去{l}旅行 酒店"),
            ("chinese", "{l} 旅行 预订"),
        ),
        chinese=True,
    ),
    Template(
        "数据库备份",
        "数据库每天凌晨三点自动备份，保留三十天。",
        "数据库备份恢复测试成功了，用了二十分钟。",
        (
            ("chinese", "数据库 备份 几点"),
            ("chinese", "备份 保留多久"),
        ),
        chinese=True,
    ),
]
ZH_WORDS = sorted(
    {
        "部署", "生产环境", "回滚", "方案", "负责", "旅行", "酒店", "预订", "数据库",
        "备份", "几点", "保留", "多久", "谁", "去", "和",
    },
    key=len,
    reverse=True,
)  # fmt: skip


@dataclass
class Conversation:
    key: str
    title: str
    messages: list[tuple[str, str]]  # (role, content)
    chinese: bool = False


@dataclass
class Question:
    kind: str
    text: str
    evidence: list[str]  # keys of the conversations that hold the fact


def _typo(word: str, rng: random.Random) -> str:
    if len(word) < 4 or not word.isascii():
        return word
    i = rng.randrange(1, len(word) - 2)
    how = rng.choice(("drop", "double", "swap"))
    if how == "drop":
        return word[:i] + word[i + 1 :]
    if how == "double":
        return word[:i] + word[i] + word[i:]
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _filler(rng: random.Random, chinese: bool) -> str:
    slots = {
        "p": rng.choice(PEOPLE),
        "l": rng.choice(PLACES),
        "t": rng.choice(TOOLS),
    }
    if chinese:
        return rng.choice(ZH_FILLER).format(n=rng.choice(ZH_NOUNS), **slots)
    n, n2 = rng.sample(FILLER_NOUNS, 2)
    return rng.choice(FILLER).format(n=n, n2=n2, **slots)


def generate(threads: int = 96) -> tuple[list[Conversation], list[Question]]:
    """Conversations (in time order) and questions, from SEED."""
    rng = random.Random(SEED)
    conversations: list[Conversation] = []
    questions: list[Question] = []
    titles: dict[str, int] = {}
    for number in range(threads):
        template = TEMPLATES[number % len(TEMPLATES)]
        slots = {"p": rng.choice(PEOPLE), "l": rng.choice(PLACES), "t": rng.choice(TOOLS)}
        sessions = rng.choice((1, 2, 3, 3, 4, 4, 5))
        keys = [f"t{number}s{i}" for i in range(sessions)]
        # The fact is said in the first session; a follow-up (if any) in a later one.
        revisited = sessions > 1 and rng.random() < 0.5
        said_in = {keys[0]} | ({keys[-1]} if revisited else set())
        for key in keys:
            messages = [
                ("user" if i % 2 == 0 else "assistant", _filler(rng, template.chinese))
                for i in range(rng.randint(40, 80))
            ]
            if key == keys[0]:
                at = rng.randrange(len(messages))
                messages[at] = (messages[at][0], template.fact.format(**slots))
            elif key in said_in:
                at = rng.randrange(len(messages))
                messages[at] = (messages[at][0], template.followup.format(**slots))
            title = template.subject.format(**slots)
            while title in titles:  # titles are unique per person, as in the app
                title = f"{template.subject.format(**slots)} #{titles[title] + 1}"
                titles[template.subject.format(**slots)] += 1
            titles.setdefault(title, 1)
            conversations.append(Conversation(key, title, messages, template.chinese))
        for kind, text in template.questions:
            text = text.format(**slots)
            questions.append(Question(kind, text, sorted(said_in)))
            if kind != "chinese":
                words = text.split()
                eligible = [i for i, w in enumerate(words) if len(w) >= 4 and w.isascii()]
                if eligible:
                    i = rng.choice(eligible)
                    words[i] = _typo(words[i], rng)
                    questions.append(Question("typo", " ".join(words), sorted(said_in)))
    rng.shuffle(conversations)  # threads interleave in time
    return conversations, questions


STOPWORDS = frozenset(
    """a an the and or not of to in on at for with by from what which who whom when where
    why how did do does was were is are am be been i me my we our you your he she it they
    that this those these into onto about and up""".split()
)


def keyword_query(question: str) -> str:
    """The keyword OR query from a question's content words (Chinese split on a small
    lexicon, longest word first; unknown Chinese runs kept whole)."""
    terms: list[str] = []
    for raw in question.replace("'s", " ").split():
        word = raw.strip("?,.!:;")
        if not word or word.lower() in STOPWORDS:
            continue
        if word.isascii():
            terms.append(word.lower())
            continue
        terms.extend(_segment(word))
    return " OR ".join(dict.fromkeys(terms))


def _segment(text: str) -> list[str]:
    out: list[str] = []
    rest = ""
    i = 0
    while i < len(text):
        word = next((w for w in ZH_WORDS if text.startswith(w, i)), None)
        if word is None:
            rest += text[i]
            i += 1
            continue
        if rest:
            out.append(rest)
            rest = ""
        if word not in ("谁", "去", "和", "几点", "多久"):
            out.append(word)
        i += len(word)
    if rest:
        out.append(rest)
    return out
