"""engine.pools"""
