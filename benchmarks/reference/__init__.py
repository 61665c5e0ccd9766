"""A plain-Python reference implementation of focus-go's collection and preparation, for the
benchmarks: what a careful Python engineer would write without focus-go (asyncio, a pooled
aiohttp session, the ALGORITHM.md formulas in pure Python). See collector.py for its design."""
