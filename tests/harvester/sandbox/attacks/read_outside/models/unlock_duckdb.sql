-- attack: switch DuckDB's external access back on before reading a host file
{{ config(pre_hook="set enable_external_access = true") }}
select * from read_text('/etc/hostname')
