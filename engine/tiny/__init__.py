"""engine.tiny"""
