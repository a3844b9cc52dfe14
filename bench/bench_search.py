"""L2 session search at scale: index build, size overhead, retrieval latency, recall@3.

Generates BENCH_SEARCH_MESSAGES messages (default 1,000,000) in conversations of 100
messages (so 10,000 at full size): English, Chinese and mixed conversations drawn from a
Zipf-distributed vocabulary with topic words, tool output and a few planted "needle"
conversations for the labelled queries. Almost all belong to one user (the worst case for
that user's searches); a second user owns the rest, so the owner filter is really applied.

Figures:
- index build time: SQLite — the FTS5 tables (unicode61 + trigram) built with 'rebuild'
  after a trigger-less bulk load; PostgreSQL — the generated tsvector column, its GIN index
  and the pg_trgm index, created after COPY;
- database size before/after the indexes (overhead);
- p50/p95 per typical query of the retrieval stage (`find_hits`) and of the whole search
  without summaries (`search_conversations`: retrieval + grouping + snippets), side by
  side with a LIKE scan of the same terms over the same rows in the same run;
- recall@3 on the labelled queries (query → the conversation that must be in the top 3).

    BENCH_SEARCH_MESSAGES=100000 python -m bench search --vendor sqlite
"""

from __future__ import annotations

import itertools
import json
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import percentiles

MESSAGES = int(os.environ.get("BENCH_SEARCH_MESSAGES", 1_000_000))
PER_CONVERSATION = 100
REPEAT = int(os.environ.get("BENCH_SEARCH_REPEAT", 20))
LIKE_REPEAT = int(os.environ.get("BENCH_SEARCH_LIKE_REPEAT", 3))
TARGET_P95_MS = 50.0
SEED = 20250301
BATCH = 20_000

# --- vocabulary -------------------------------------------------------------------------------

ENGLISH = """the a to and of i you it is that in we for this with on be can not have do
are if so but what at as or was will just my me your from there how about like one up get
all no out need should use would also make now then here think know let see yes ok okay
thanks please could because when which more time check file run error set try want change
working work looks new way first still going right same only good fix test add update
remove problem issue code version line config server user data function value list build
output command message start again back version path folder script deploy deployment
database migration connection refused timeout request response api endpoint token key
password login session cache memory disk cpu process thread queue worker task job cron
docker container image kubernetes cluster node pod service ingress nginx apache proxy
certificate tls https dns domain port socket websocket websockets redis postgres sqlite
mysql index query table column schema backup restore rollback release branch merge commit
push pull review tests unit integration pipeline ci staging production logs logging
monitor alert metrics latency throughput benchmark performance slow fast memory leak crash
exception traceback stack warning debug info trace patch upgrade install package dependency
python django celery javascript typescript react css html template form model view url
route middleware settings environment variable secret permission role admin account email
invoice customer report meeting schedule deadline plan roadmap budget estimate design
document draft summary notes idea question answer decision agreed decided later tomorrow
yesterday week month quarter travel flight hotel booking recipe dinner lunch coffee garden
book movie music guitar piano running training health doctor appointment birthday gift
family kids school homework math physics chemistry history language spanish french german
translation grammar essay article blog post photo camera video edit export import csv json
yaml xml markdown pdf spreadsheet chart graph dashboard widget button layout mobile phone
android ios browser chrome firefox safari extension plugin theme font color dark light
terminal shell bash zsh ssh git github gitlab vim emacs editor keyboard shortcut mouse
monitor laptop battery charger network wifi router vpn firewall bandwidth upload download
storage bucket s3 cdn cloud aws gcp azure region zone instance vm terraform ansible helm
chart values manifest yaml secret vault rotation audit compliance gdpr privacy policy
""".split()

CHINESE = """我们 你 他 这个 那个 问题 需要 可以 已经 还是 因为 所以 但是 如果 然后 现在 明天
昨天 今天 时间 工作 项目 部署 脚本 服务器 数据库 迁移 配置 文件 错误 日志 测试 版本 更新
用户 权限 密码 登录 网络 连接 超时 请求 响应 接口 缓存 内存 磁盘 进程 线程 队列 任务 定时
容器 镜像 集群 节点 服务 代理 证书 域名 端口 备份 恢复 回滚 发布 分支 合并 提交 审查
流水线 生产 环境 监控 告警 指标 延迟 性能 优化 异常 警告 调试 升级 安装 依赖 模板 表单
模型 视图 路由 中间件 变量 密钥 角色 管理员 账号 邮件 发票 客户 报告 会议 计划 预算 设计
文档 草稿 总结 笔记 想法 答案 决定 同意 旅行 航班 酒店 预订 菜谱 晚饭 午饭 咖啡 花园
电影 音乐 吉他 钢琴 跑步 训练 健康 医生 预约 生日 礼物 家人 孩子 学校 作业 数学 物理
历史 语言 翻译 语法 文章 博客 照片 相机 视频 编辑 导出 导入 表格 图表 仪表盘 按钮 布局
手机 浏览器 插件 主题 字体 颜色 终端 键盘 快捷键 笔记本 电池 路由器 防火墙 带宽 上传 下载
存储 云服务 区域 实例 虚拟机 负载均衡器 配置文件 数据库迁移 部署脚本 消息队列 定时任务
""".split()

SYLLABLES = "ka lo mi ren tu vo sel dar pin gro fex nal tor bi qu zen mar lis opt ul".split()
HANZI = list("的一是不了人在有我他这中大来上国个到说们为子和你地出道也时年得就那要下以生会")

TOPICS = [
    ["deploy", "script", "server", "nginx", "release"],
    ["database", "migration", "postgres", "schema", "rollback"],
    ["docker", "container", "image", "kubernetes", "cluster"],
    ["websocket", "connection", "timeout", "proxy", "socket"],
    ["invoice", "customer", "report", "budget", "quarter"],
    ["recipe", "dinner", "garden", "coffee", "lunch"],
    ["travel", "flight", "hotel", "booking", "week"],
    ["python", "django", "celery", "worker", "queue"],
    ["certificate", "tls", "dns", "domain", "https"],
    ["backup", "restore", "storage", "bucket", "s3"],
]
CHINESE_TOPICS = [
    ["部署", "脚本", "服务器", "发布", "回滚"],
    ["数据库", "迁移", "备份", "恢复", "版本"],
    ["会议", "计划", "预算", "报告", "客户"],
    ["旅行", "航班", "酒店", "预订", "时间"],
]


def _vocabulary(rng: random.Random) -> tuple[list[str], list[str]]:
    tail = {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(30_000)}
    english = list(dict.fromkeys(ENGLISH)) + sorted(tail - set(ENGLISH))
    ztail = {"".join(rng.choice(HANZI) for _ in range(rng.randint(2, 3))) for _ in range(8_000)}
    chinese = list(dict.fromkeys(CHINESE)) + sorted(ztail - set(CHINESE))
    return english, chinese


def _zipf_weights(n: int) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank + 2) ** 1.05 for rank in range(n)))


# --- labelled queries ------------------------------------------------------------------------

# (query, sentence planted in the target conversation); the words also occur elsewhere.
NEEDLES_EN = [
    ("nginx websocket timeout", "the nginx proxy drops the websocket after the timeout"),
    ("postgres rollback migration", "we decided the postgres migration needs a rollback"),
    ("celery worker memory leak", "the celery worker has a memory leak after each task"),
    ("certificate rotation vault", "certificate rotation now runs from vault every month"),
    ('"staging deploy" budget', "the staging deploy fits the budget for this quarter"),
    ("terraform region bucket", "terraform creates the bucket in the second region"),
    ("invoice csv export", "the invoice export writes csv with one line per customer"),
    ("piano birthday gift", "a piano lesson is the birthday gift for the kids"),
    ("flight hotel booking tomorrow", "booking the flight and the hotel tomorrow morning"),
    ("redis queue latency", "redis queue latency went up under the benchmark"),
    ("kuber* ingress certificate", "kubernetes ingress needs the new certificate"),
    ("grafana dashboard widget", "grafana dashboard gets a widget for disk usage"),
]
NEEDLES_ZH = [
    ("负载均衡器 配置文件", "负载均衡器的配置文件需要更新证书"),
    ("数据库迁移 回滚", "数据库迁移失败以后我们决定回滚"),
    ("部署脚本 超时", "部署脚本在生产环境超时了"),
    ("会议 预算 报告", "会议上同意了预算和季度报告"),
]

TYPICAL = [
    "deploy script",
    "connection refused",
    '"database migration"',
    "kuber*",
    "nginx OR apache",
    "error NOT timeout",
    "invoice customer report",
    "部署",
    "数据库迁移",
    "服务器 配置",
    "websock",
]


# --- data generation -------------------------------------------------------------------------


class Generator:
    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.english, self.chinese = _vocabulary(self.rng)
        self.en_cum = _zipf_weights(len(self.english))
        self.zh_cum = _zipf_weights(len(self.chinese))

    def words(self, n: int, *, chinese: bool, topic: list[str]) -> list[str]:
        rng = self.rng
        vocab, cum = (self.chinese, self.zh_cum) if chinese else (self.english, self.en_cum)
        out = rng.choices(vocab, cum_weights=cum, k=n)
        for i in range(len(out)):
            if rng.random() < 0.12:
                out[i] = rng.choice(topic)
        return out

    def text(self, n: int, *, chinese: bool, topic: list[str]) -> str:
        words = self.words(n, chinese=chinese, topic=topic)
        if chinese:
            # Chinese is written without spaces; punctuation breaks it into clauses.
            return "，".join("".join(words[i : i + 4]) for i in range(0, len(words), 4)) + "。"
        return " ".join(words).capitalize() + "."


def _session_columns() -> list[str]:
    from sessions_app.models import Session

    return [f.column for f in Session._meta.concrete_fields]


def _message_columns() -> list[str]:
    from sessions_app.models import Message

    return [f.column for f in Message._meta.concrete_fields]


def _defaults(model: Any) -> dict[str, Any]:
    from django.db import connection

    values = {}
    for f in model._meta.concrete_fields:
        default = f.get_default() if f.has_default() else None
        if default is None:
            values[f.column] = None
        else:
            values[f.column] = f.get_db_prep_save(default, connection)
    return values


def generate(owner_id: int, outsider_id: int, emit: Any) -> dict[str, Any]:
    """Stream rows to `emit(kind, rows)`; return the labels {query: target session id}."""
    from django.db import connection

    from sessions_app.models import Message, Session

    gen = Generator()
    rng = gen.rng
    conversations = max(1, MESSAGES // PER_CONVERSATION)
    session_defaults = _defaults(Session)
    message_defaults = _defaults(Message)
    scols, mcols = _session_columns(), _message_columns()
    adapt = connection.ops.adapt_datetimefield_value
    base = datetime(2025, 1, 1, tzinfo=UTC)
    spacing = timedelta(minutes=2)

    needles = NEEDLES_EN + NEEDLES_ZH
    planted = rng.sample(range(conversations), min(len(needles), conversations))
    plant_at = dict(zip(planted, needles, strict=False))
    labels: dict[str, str] = {}

    sessions: list[tuple] = []
    messages: list[tuple] = []
    message_id = 0
    for c in range(conversations):
        sid = f"b{c:08d}"
        kind = rng.random()
        chinese = kind < 0.2
        mixed = 0.2 <= kind < 0.3
        topic = rng.choice(CHINESE_TOPICS if chinese else TOPICS)
        started = base + timedelta(minutes=c * 50)
        owner = outsider_id if c % 50 == 49 else owner_id
        needle = plant_at.get(c)
        needle_slots = set(rng.sample(range(PER_CONVERSATION), 4)) if needle else set()
        if needle:
            labels[needle[0]] = sid
        session = dict(session_defaults)
        session.update(
            id=sid,
            owner_id=owner,
            title=f"Conversation {c}" if c % 3 else None,
            started_at=adapt(started),
            last_activity_at=adapt(started + spacing * PER_CONVERSATION),
            message_count=PER_CONVERSATION,
        )
        sessions.append(tuple(session[col] for col in scols))
        for i in range(PER_CONVERSATION):
            message_id += 1
            zh = chinese or (mixed and rng.random() < 0.5)
            slot = i % 10
            role = "tool" if slot == 7 else ("user" if slot % 2 == 0 else "assistant")
            length = {"user": 14, "assistant": 32, "tool": 50}[role]
            content = gen.text(rng.randint(length // 2, length * 3 // 2), chinese=zh, topic=topic)
            if i in needle_slots:
                content = f"{content} {needle[1]}."
            row = dict(message_defaults)
            row.update(
                id=message_id,
                session_id=sid,
                role=role,
                content=content,
                timestamp=adapt(started + spacing * i),
                tool_call_id=f"call_{message_id}" if role == "tool" else "",
                tool_name="terminal" if role == "tool" else "",
                status="complete" if role == "assistant" else "",
            )
            messages.append(tuple(row[col] for col in mcols))
        if len(messages) >= BATCH:
            emit("sessions", sessions)
            emit("messages", messages)
            sessions, messages = [], []
    emit("sessions", sessions)
    emit("messages", messages)
    return labels


# --- loading and indexing per vendor ---------------------------------------------------------


def _sqlite_size() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return pages * cursor.fetchone()[0]


def _pg_size() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size('sessions_app_message'),"
            " pg_relation_size('sessions_app_message')"
        )
        total, heap = cursor.fetchone()
    return {"total": total, "heap": heap}


def load_and_index(vendor: str, owner_id: int, outsider_id: int) -> dict[str, Any]:
    from django.db import connection

    from sessions_app.migrations import _fts_sql as fts

    figures: dict[str, Any] = {}
    scols, mcols = _session_columns(), _message_columns()
    with connection.cursor() as cursor:
        for statement in fts.SQLITE_REVERSE if vendor == "sqlite" else fts.POSTGRES_REVERSE:
            cursor.execute(statement)

    connection.ensure_connection()
    if vendor == "sqlite":
        raw = connection.connection
        s_sql = f"INSERT INTO sessions_app_session ({', '.join(scols)}) VALUES ({', '.join('?' * len(scols))})"  # noqa: E501, S608
        m_sql = f"INSERT INTO sessions_app_message ({', '.join(mcols)}) VALUES ({', '.join('?' * len(mcols))})"  # noqa: E501, S608

        # A throwaway database: durability does not matter while loading.
        raw.execute("PRAGMA synchronous=OFF")

        def emit(kind: str, rows: list[tuple]) -> None:
            raw.execute("BEGIN")
            raw.executemany(s_sql if kind == "sessions" else m_sql, rows)
            raw.execute("COMMIT")

    else:
        raw_cursor = connection.cursor().cursor

        def emit(kind: str, rows: list[tuple]) -> None:
            table, cols = (
                ("sessions_app_session", scols)
                if kind == "sessions"
                else ("sessions_app_message", mcols)
            )
            with raw_cursor.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    started = time.perf_counter()
    labels = generate(owner_id, outsider_id, emit)
    figures["load_s"] = round(time.perf_counter() - started, 1)

    with connection.cursor() as cursor:
        if vendor == "sqlite":
            cursor.execute("ANALYZE")
            before = _sqlite_size()
            started = time.perf_counter()
            for statement in fts.SQLITE_FORWARD:
                cursor.execute(statement)
            figures["index_build_s"] = round(time.perf_counter() - started, 1)
            cursor.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            cursor.execute(
                "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('optimize')"
            )
            cursor.execute("ANALYZE")
            after = _sqlite_size()
            figures["db_bytes_before_index"] = before
            figures["db_bytes_after_index"] = after
        else:
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence('sessions_app_message', 'id'),"
                " (SELECT max(id) FROM sessions_app_message))"
            )
            # Fresh statistics for every table, as autovacuum would have by now.
            cursor.execute("VACUUM ANALYZE")
            before = _pg_size()
            started = time.perf_counter()
            for statement in fts.POSTGRES_FORWARD:
                cursor.execute(statement)
            figures["index_build_s"] = round(time.perf_counter() - started, 1)
            cursor.execute("VACUUM ANALYZE sessions_app_message")
            after = _pg_size()
            cursor.execute(
                "SELECT pg_relation_size('message_search_vector_idx'),"
                " pg_relation_size('message_content_trgm_idx')"
            )
            gin, trgm = cursor.fetchone()
            figures["db_bytes_before_index"] = before["total"]
            figures["db_bytes_after_index"] = after["total"]
            figures["tsvector_column_bytes"] = after["heap"] - before["heap"]
            figures["gin_index_bytes"] = gin
            figures["trgm_index_bytes"] = trgm
    figures["index_overhead_bytes"] = (
        figures["db_bytes_after_index"] - figures["db_bytes_before_index"]
    )
    figures["index_overhead_ratio"] = round(
        figures["db_bytes_after_index"] / max(1, figures["db_bytes_before_index"]), 2
    )
    figures["labels"] = labels
    return figures


# --- measurements ----------------------------------------------------------------------------


def _like_scan(owner_id: int, query: str) -> int:
    """The naive alternative: LIKE over message text for every term, owner-scoped,
    newest first, 50 rows."""
    from django.db import connection

    from sessions_app.search.backends import _filter_sql, _like_condition
    from sessions_app.search.sanitize import parse_query

    parsed = parse_query(query)
    if not parsed:
        return 0
    operator = "ILIKE" if connection.vendor == "postgresql" else "LIKE"
    condition, params = _like_condition(parsed, columns=("m.content",), operator=operator)
    where, fparams = _filter_sql(owner_id, _no_filters())
    sql = f"""SELECT m.id FROM sessions_app_message m
              JOIN sessions_app_session s ON s.id = m.session_id
              WHERE {condition} {where} ORDER BY m.id DESC LIMIT 50"""  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *fparams])
        return len(cursor.fetchall())


def _no_filters() -> Any:
    from sessions_app.search.backends import Filters

    return Filters()


def _time(fn: Any, repeat: int) -> list[float]:
    fn()  # warm the cache: we measure steady-state lookups
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def measure(owner: Any, labels: dict[str, str]) -> dict[str, Any]:
    from sessions_app.search.backends import find_hits
    from sessions_app.search.sanitize import parse_query
    from sessions_app.search.service import DEFAULT_ROWS, search_conversations

    english = Generator().english
    rare = english[len(set(ENGLISH)) + 5000]  # a word from the long tail
    per_query = {}
    all_retrieval: list[float] = []
    all_search: list[float] = []
    all_like: list[float] = []
    for query in [*TYPICAL, rare]:
        parsed = parse_query(query)
        # The same row count the search itself asks for.
        page = find_hits(owner_id=owner.pk, query=parsed, limit=DEFAULT_ROWS)
        retrieval = _time(
            lambda p=parsed: find_hits(owner_id=owner.pk, query=p, limit=DEFAULT_ROWS), REPEAT
        )
        search = _time(lambda q=query: search_conversations(owner=owner, query=q, limit=3), REPEAT)
        like = _time(lambda q=query: _like_scan(owner.pk, q), LIKE_REPEAT)
        all_retrieval += retrieval
        all_search += search
        all_like += like
        per_query[query] = {
            "route": page.route,
            "hits": len(page.hits),
            "retrieval": percentiles(retrieval),
            "search": percentiles(search),
            "like_scan": percentiles(like),
        }
        print(
            f"  {query!r:28} {page.route:14} hits={len(page.hits):3} "
            f"retrieval p95={per_query[query]['retrieval']['p95_ms']:8.2f} ms  "
            f"search p95={per_query[query]['search']['p95_ms']:8.2f} ms  "
            f"LIKE p95={per_query[query]['like_scan']['p95_ms']:9.2f} ms",
            flush=True,
        )

    found = {}
    for query, target in labels.items():
        result = search_conversations(owner=owner, query=query, limit=3)
        found[query] = {
            "target": target,
            "top3": [c.root_id for c in result.conversations],
            "hit": target in [c.root_id for c in result.conversations],
            "route": result.route,
        }
    recall = statistics.fmean(1.0 if f["hit"] else 0.0 for f in found.values()) if found else 0
    return {
        "queries": per_query,
        "retrieval_overall": percentiles(all_retrieval),
        "search_overall": percentiles(all_search),
        "like_scan_overall": percentiles(all_like),
        "recall_at_3": round(recall, 3),
        "recall_detail": found,
    }


def run(vendor: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    User = get_user_model()
    owner = User.objects.create_user(username="bench-owner", password="x")
    outsider = User.objects.create_user(username="bench-outsider", password="x")
    print(f"search bench on {vendor}: {MESSAGES:,} messages", flush=True)
    figures = load_and_index(vendor, owner.pk, outsider.pk)
    labels = figures.pop("labels")
    print(
        f"  load {figures['load_s']} s, index build {figures['index_build_s']} s, "
        f"size {figures['db_bytes_before_index'] / 1e6:.0f} → "
        f"{figures['db_bytes_after_index'] / 1e6:.0f} MB",
        flush=True,
    )
    measured = measure(owner, labels)
    p95 = measured["search_overall"].get("p95_ms", 0)
    return {
        "messages": MESSAGES,
        "conversations": max(1, MESSAGES // PER_CONVERSATION),
        **figures,
        **measured,
        "target_p95_ms": TARGET_P95_MS,
        "meets_target": p95 <= TARGET_P95_MS,
        "recall_queries": len(labels),
        "generated_at": datetime.now(UTC).isoformat(),
        "settings": json.loads(json.dumps({"repeat": REPEAT, "like_repeat": LIKE_REPEAT})),
    }
