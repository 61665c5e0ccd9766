"""What the search, critic and reward flags of ``focus-go collect`` describe, built once
before anything starts (a bad value fails there, with the library's own message)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Optional

from ..critic import Critic
from ..preparation import DirectBranchTd, Estimator, GroupBaseline, RewardConfig, TreeGroupBaseline
from ..search import Independent, Selective


# The values of --estimator (collect and view) and the recipe each selects.
ESTIMATORS = {"direct-branch-td": DirectBranchTd, "group-baseline": GroupBaseline, "tree-group-baseline": TreeGroupBaseline}


@dataclass(frozen=True)
class Settings:
    """The search, critic (None for ``--no-critic``), reward config and estimator of a run."""

    search: Any
    critic: Optional[Critic]
    reward: RewardConfig
    estimator: Estimator


def settings(args: argparse.Namespace) -> Settings:
    """The search, critic, reward config and estimator the flags describe."""
    if args.search == "independent":
        search: Any = Independent(args.budget, seed=args.seed)
    else:
        search = Selective(args.budget, args.warmup, per_pass=args.per_pass, max_children=args.max_children, score=args.score, seed=args.seed,
                           stop_alike=args.stop_alike)
    if args.no_critic:
        critic = None
    elif args.critic_url:
        critic = Critic.http(args.critic_url, timeout=getattr(args, "timeout", None))
    else:
        critic = Critic.constant(args.critic_value)
    reward = RewardConfig(gamma=args.gamma, critic_weight=args.critic_weight, reward_min=args.reward_min,
                          reward_max=args.reward_max, truncated_reward=args.truncated_reward, truncation=args.truncation)
    return Settings(search, critic, reward, ESTIMATORS[args.estimator]())


def describe_critic(args: argparse.Namespace) -> str:
    """The critic in words, for the start line and ``run.json``."""
    if args.no_critic:
        return "none"
    if args.critic_url:
        return f"http {args.critic_url}"
    return f"constant {args.critic_value}"
