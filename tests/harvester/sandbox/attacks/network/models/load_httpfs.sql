-- attack: load a network extension that may already be cached on the host
{{ config(pre_hook="load httpfs") }}
select 1 as x
