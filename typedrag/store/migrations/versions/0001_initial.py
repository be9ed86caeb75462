"""The first schema: users, API keys, grants, conversations, messages, feedback.

A migration is a frozen record of one change: it spells its tables out rather than importing
typedrag.store.schema, which moves on with later revisions.

Revision ID: 0001
Revises:
Create Date: 2026-11-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # an INTEGER PRIMARY KEY is SQLite's auto-increment


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column(
            "disabled",
            sa.Boolean(create_constraint=True, name="disabled_bool"),
            server_default=sa.false(),
            nullable=False,
        ),
        sa.CheckConstraint("role IN ('admin', 'editor', 'reader')", name=op.f("ck_users_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("user_id", Id, nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("hash", sa.String(length=256), nullable=False),
        sa.Column("label", sa.String(length=100), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_api_keys_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_index(op.f("ix_api_keys_user_id"), "api_keys", ["user_id"], unique=False)
    op.create_table(
        "grants",
        sa.Column("user_id", Id, nullable=False),
        sa.Column("collection", sa.String(length=128), nullable=False),
        sa.Column("access", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("access IN ('read', 'write')", name=op.f("ck_grants_access")),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_grants_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "collection", name=op.f("pk_grants")),
    )
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("owner_id", Id, nullable=False),
        sa.Column("collection", sa.String(length=128), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_conversations_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversations")),
    )
    op.create_index("ix_conversations_owner_recent", "conversations", ["owner_id", "updated_at", "id"], unique=False)
    op.create_table(
        "messages",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.String(length=32), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.String(length=128), nullable=True),
        sa.Column("method", sa.String(length=64), nullable=True),
        sa.Column("type", sa.String(length=64), nullable=True),
        sa.Column("strategy", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("role IN ('user', 'assistant', 'system')", name=op.f("ck_messages_role")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_messages_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
    )
    op.create_index(op.f("ix_messages_conversation_id"), "messages", ["conversation_id"], unique=False)
    op.create_table(
        "feedback",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("message_id", Id, nullable=False),
        sa.Column("user_id", Id, nullable=False),
        sa.Column("verdict", sa.String(length=8), nullable=False),
        sa.Column("comment", sa.Text(), server_default="", nullable=False),
        sa.Column("helpful", sa.Text(), server_default="[]", nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("verdict IN ('up', 'down')", name=op.f("ck_feedback_verdict")),
        sa.ForeignKeyConstraint(
            ["message_id"], ["messages.id"], name=op.f("fk_feedback_message_id_messages"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_feedback_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback")),
        sa.UniqueConstraint("message_id", "user_id", name=op.f("uq_feedback_message_id_user_id")),
    )
    op.create_index(op.f("ix_feedback_user_id"), "feedback", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_table("feedback")
    op.drop_table("messages")
    op.drop_table("conversations")
    op.drop_table("grants")
    op.drop_table("api_keys")
    op.drop_table("users")
