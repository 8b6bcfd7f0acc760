-- attack: download an extension that can reach the network
{{ config(pre_hook="install httpfs") }}
select 1 as x
