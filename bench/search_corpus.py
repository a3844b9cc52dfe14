"""The search benchmark's corpus: a seeded Zipf vocabulary (English, Chinese, mixed), topic
words, tool output, and planted "needle" conversations for the labelled queries. The same
seed gives the same rows on every vendor and every run."""

from __future__ import annotations

import itertools
import os
import random
from datetime import UTC, datetime, timedelta
from typing import Any

MESSAGES = int(os.environ.get("BENCH_SEARCH_MESSAGES", 1_000_000))
PER_CONVERSATION = 100
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


def session_columns() -> list[str]:
    from sessions_app.models import Session

    return [f.column for f in Session._meta.concrete_fields]


def message_columns() -> list[str]:
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
    scols, mcols = session_columns(), message_columns()
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
